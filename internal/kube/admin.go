package kube

import (
	"context"
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tenure-go/tenure/lease"
)

// listPage is how many Leases one List call returns.
const listPage = 500

// List implements lease.Lister: the namespace's Leases, a page at a time,
// whose lease name starts with prefix: those tenure wrote by the name in
// tenure.dev/name, and the others (Foreign: client-go's, a controller's)
// by their object name, which Get refuses as foreign.
func (s *Store) List(ctx context.Context, prefix string, fn func(name string) error) error {
	opts := metav1.ListOptions{Limit: listPage}
	for {
		page, err := s.leases.List(ctx, opts)
		if err != nil {
			return s.failed(ctx, "list", prefix+"*", err)
		}
		if len(page.Items) == 0 && opts.Continue == "" {
			// A namespace that does not exist lists empty.
			if err := s.absent(ctx, prefix+"*"); !errors.Is(err, lease.ErrNotFound) {
				return err
			}
		}
		for i := range page.Items {
			name, ok := page.Items[i].Annotations[AnnotationName]
			if !ok {
				name = page.Items[i].Name // foreign: named as Get finds it
			}
			if !strings.HasPrefix(name, prefix) || lease.ValidateName(name) != nil {
				continue // not asked for
			}
			if err := fn(name); err != nil {
				return err
			}
		}
		if opts.Continue = page.Continue; opts.Continue == "" {
			return nil
		}
	}
}

// Delete implements lease.Deleter: a Delete of the Lease with its
// resourceVersion as the precondition; with lease.AnyVersion, none.
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	if err := lease.CheckDelete(ctx, name); err != nil {
		return err
	}
	var opts metav1.DeleteOptions
	if expect != lease.AnyVersion {
		rv := string(expect)
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: &rv}
	}
	err := s.leases.Delete(ctx, ObjectName(name), opts)
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err) && !namespaceMissing(err):
		return lease.NotFound(name)
	case apierrors.IsConflict(err):
		return lease.Conflict(name)
	}
	return s.failed(ctx, "delete", name, err)
}
