package dynamofence

import (
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// placeholders picks expression attribute names and values for the fence
// that the caller's maps do not use. DynamoDB refuses an expression that uses
// a placeholder its maps do not define, so a name missing from the maps
// cannot occur in the caller's expressions either: it cannot collide.
type placeholders struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

// newPlaceholders copies the caller's maps, which are never modified.
func newPlaceholders(names map[string]string, values map[string]types.AttributeValue) *placeholders {
	p := &placeholders{
		names:  make(map[string]string, len(names)+3),
		values: make(map[string]types.AttributeValue, len(values)+2),
	}
	for k, v := range names {
		p.names[k] = v
	}
	for k, v := range values {
		p.values[k] = v
	}
	return p
}

// name returns a new placeholder "#<base>" (or "#<base>_<n>") for attribute.
func (p *placeholders) name(base, attribute string) string {
	ph := free("#"+base, func(s string) bool { _, ok := p.names[s]; return ok })
	p.names[ph] = attribute
	return ph
}

// value returns a new placeholder ":<base>" (or ":<base>_<n>") for v.
func (p *placeholders) value(base string, v types.AttributeValue) string {
	ph := free(":"+base, func(s string) bool { _, ok := p.values[s]; return ok })
	p.values[ph] = v
	return ph
}

func free(base string, taken func(string) bool) string {
	ph := base
	for n := 2; taken(ph); n++ {
		ph = base + "_" + strconv.Itoa(n)
	}
	return ph
}

// and joins the caller's condition and the fence's; either may be empty.
func and(user, fence string) string {
	switch {
	case strings.TrimSpace(user) == "":
		return fence
	case fence == "":
		return user
	}
	return "(" + user + ") AND (" + fence + ")"
}

// addToUpdate returns expr with set added to its SET clause and remove to
// its REMOVE clause, each clause created at the end if expr has none (an
// update expression may hold each clause keyword only once). Clause keywords
// are reserved words, so in a valid expression a bare word SET, REMOVE, ADD
// or DELETE, in any case and not part of a placeholder, can only start a
// clause.
func addToUpdate(expr, set, remove string) string {
	type insert struct {
		at   int
		text string
	}
	var ins []insert
	setAt, removeAt := clause(expr, "SET"), clause(expr, "REMOVE")
	if setAt >= 0 {
		ins = append(ins, insert{setAt, " " + set + ","})
	}
	if removeAt >= 0 {
		ins = append(ins, insert{removeAt, " " + remove + ","})
	}
	sort.Slice(ins, func(i, j int) bool { return ins[i].at > ins[j].at })
	for _, in := range ins {
		expr = expr[:in.at] + in.text + expr[in.at:]
	}
	expr = strings.TrimSpace(expr)
	if setAt < 0 {
		expr += " SET " + set
	}
	if removeAt < 0 {
		expr += " REMOVE " + remove
	}
	return strings.TrimSpace(expr)
}

// clause returns the offset just past the keyword that starts the clause kw
// in expr, or -1.
func clause(expr, kw string) int {
	for i := 0; i < len(expr); {
		if !isWord(expr[i]) {
			i++
			continue
		}
		j := i
		for j < len(expr) && isWord(expr[j]) {
			j++
		}
		placeholder := i > 0 && (expr[i-1] == '#' || expr[i-1] == ':')
		if !placeholder && strings.EqualFold(expr[i:j], kw) {
			return j
		}
		i = j
	}
	return -1
}

func isWord(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}
