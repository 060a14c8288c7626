package dynamofence

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestAddToUpdate(t *testing.T) {
	const set, remove = "#t = :t", "#x"
	tests := []struct{ in, want string }{
		{"", "SET #t = :t REMOVE #x"},
		{"SET a = :a", "SET #t = :t, a = :a REMOVE #x"},
		{"set a = :a", "set #t = :t, a = :a REMOVE #x"},
		{"  SET a = :a  ", "SET #t = :t, a = :a REMOVE #x"},
		{"REMOVE b", "REMOVE #x, b SET #t = :t"},
		{"SET a = :a REMOVE b", "SET #t = :t, a = :a REMOVE #x, b"},
		{"REMOVE b SET a = :a", "REMOVE #x, b SET #t = :t, a = :a"},
		{"ADD n :one", "ADD n :one SET #t = :t REMOVE #x"},
		{"ADD n :one DELETE s :s", "ADD n :one DELETE s :s SET #t = :t REMOVE #x"},
		// Placeholders and words that contain a keyword are not clauses.
		{"ADD #set :remove", "ADD #set :remove SET #t = :t REMOVE #x"},
		{"ADD settings :one", "ADD settings :one SET #t = :t REMOVE #x"},
		{"SET a = list_append(a, :set)", "SET #t = :t, a = list_append(a, :set) REMOVE #x"},
		{"SET a[2].b = :v\nREMOVE\tc", "SET #t = :t, a[2].b = :v\nREMOVE #x,\tc"},
	}
	for _, tt := range tests {
		if got := addToUpdate(tt.in, set, remove); got != tt.want {
			t.Errorf("addToUpdate(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPlaceholdersAvoidTheCallers(t *testing.T) {
	names := map[string]string{"#tenure_fence_token": "mine", "#tenure_fence_token_2": "mine too"}
	values := map[string]types.AttributeValue{":tenure_fence_lease": &types.AttributeValueMemberS{Value: "x"}}
	p := newPlaceholders(names, values)
	if got := p.name("tenure_fence_token", "fence_token"); got != "#tenure_fence_token_3" {
		t.Errorf("name = %q, want #tenure_fence_token_3", got)
	}
	if got := p.value("tenure_fence_lease", &types.AttributeValueMemberS{Value: "y"}); got != ":tenure_fence_lease_2" {
		t.Errorf("value = %q, want :tenure_fence_lease_2", got)
	}
	if len(names) != 2 || len(values) != 1 {
		t.Errorf("the caller's maps were modified: %v %v", names, values)
	}
	if p.names["#tenure_fence_token"] != "mine" {
		t.Errorf("the caller's placeholder was replaced")
	}
}

func TestAnd(t *testing.T) {
	if got := and("", "F"); got != "F" {
		t.Errorf("and(\"\", F) = %q", got)
	}
	if got := and("  ", "F"); got != "F" {
		t.Errorf("and(blank, F) = %q", got)
	}
	// Parentheses keep a caller's OR from binding to the fence.
	if got, want := and("a = :a OR b = :b", "F"), "(a = :a OR b = :b) AND (F)"; got != want {
		t.Errorf("and = %q, want %q", got, want)
	}
}
