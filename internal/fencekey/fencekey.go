// Package fencekey holds the context keys of package fencing, so that
// tenure's term context can answer them itself: one context per term
// instead of a value context for each.
package fencekey

// Fence is the key of the fencing.Fence a context carries.
type Fence struct{}

// Term is the key of the func() error that says whether the term ended.
type Term struct{}
