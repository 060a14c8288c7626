package dynamolease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestConfigDefaults(t *testing.T) {
	cfg := Config{Table: "leases"}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.KeyAttribute != "lease" || cfg.TTLAttribute != "" || cfg.TTLSlack != 0 {
		t.Errorf("defaults: %+v, want KeyAttribute lease, no TTL", cfg)
	}
	cfg = Config{Table: "leases", TTLAttribute: "expires_at"}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.TTLSlack != 7*24*time.Hour {
		t.Errorf("TTLSlack default = %v, want 168h", cfg.TTLSlack)
	}
}

func TestConfigValidate(t *testing.T) {
	long := strings.Repeat("t", 256)
	cases := []struct {
		cfg  Config
		want string // in the error; "" for none
	}{
		{Config{Table: "abc"}, ""},
		{Config{Table: "My_table.v-2"}, ""},
		{Config{Table: long[:255]}, ""},
		{Config{}, "table name"},
		{Config{Table: "ab"}, "3 to 255"},
		{Config{Table: long}, "3 to 255"},
		{Config{Table: "my table"}, `' '`},
		{Config{Table: "leases/x"}, `'/'`},
		{Config{Table: "arn:aws:dynamodb:us-east-1:123456789012:table/leases"}, `':'`},
		{Config{Table: "tablé"}, "not allowed"},
		{Config{Table: "leases", KeyAttribute: "pk"}, ""},
		{Config{Table: "leases", KeyAttribute: "Lease Name ☃"}, ""},
		{Config{Table: "leases", KeyAttribute: "token"}, "reserved"},
		{Config{Table: "leases", KeyAttribute: "version"}, "reserved"},
		{Config{Table: "leases", KeyAttribute: strings.Repeat("k", 256)}, "limit 255"},
		{Config{Table: "leases", KeyAttribute: "a\xffb"}, "UTF-8"},
		{Config{Table: "leases", KeyAttribute: "a\nb"}, "printable"},
		{Config{Table: "leases", TTLAttribute: "expires_at"}, ""},
		{Config{Table: "leases", TTLAttribute: "expires_at", TTLSlack: time.Hour}, ""},
		{Config{Table: "leases", TTLAttribute: "lease"}, "both"},
		{Config{Table: "leases", KeyAttribute: "pk", TTLAttribute: "pk"}, "both"},
		{Config{Table: "leases", TTLAttribute: "written_at"}, "reserved"},
		{Config{Table: "leases", TTLAttribute: "x\x00"}, "printable"},
		{Config{Table: "leases", TTLAttribute: "expires_at", TTLSlack: 7 * time.Second}, "below the minimum"},
		{Config{Table: "leases", TTLAttribute: "expires_at", TTLSlack: -time.Hour}, "below the minimum"},
		{Config{Table: "leases", TTLSlack: 24 * time.Hour}, "TTLAttribute is empty"},
	}
	for _, c := range cases {
		cfg := c.cfg
		err := cfg.validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.cfg, err)
		case c.want != "" && err == nil:
			t.Errorf("%+v: no error, want one saying %q", c.cfg, c.want)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%+v: %v, want an error saying %q", c.cfg, err, c.want)
		case err != nil && !strings.HasPrefix(err.Error(), "dynamolease: "):
			t.Errorf("%+v: %q lacks the package prefix", c.cfg, err)
		}
	}
}

func TestNew(t *testing.T) {
	if _, err := New(nil, Config{Table: "leases"}); err == nil {
		t.Error("New with a nil API: no error")
	}
	// A client that is never used: New makes no request.
	api := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	if _, err := New(api, Config{}); err == nil {
		t.Error("New without a table: no error")
	}
	s, err := New(api, Config{Table: "leases"})
	if err != nil {
		t.Fatal(err)
	}
	if s.key != "lease" || s.ttl != "" {
		t.Errorf("New filled key %q, ttl %q; want lease and none", s.key, s.ttl)
	}
}

func TestCreateTableChecksOptionsFirst(t *testing.T) {
	// A nil API would panic if CreateTable sent anything.
	for _, c := range []struct {
		table string
		opts  TableOptions
	}{
		{"ab", TableOptions{}},
		{"leases", TableOptions{KeyAttribute: "holder"}},
		{"leases", TableOptions{TTLAttribute: "lease"}},
	} {
		err := CreateTable(context.Background(), nil, c.table, c.opts)
		if err == nil || !strings.HasPrefix(err.Error(), "create table: dynamolease: ") {
			t.Errorf("CreateTable(%q, %+v) = %v, want a configuration error", c.table, c.opts, err)
		}
	}
}

func TestCheckKeySchema(t *testing.T) {
	def := func(name string, typ types.ScalarAttributeType) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: typ}
	}
	key := func(name string, typ types.KeyType) types.KeySchemaElement {
		return types.KeySchemaElement{AttributeName: aws.String(name), KeyType: typ}
	}
	cases := []struct {
		label string
		desc  *types.TableDescription
		ok    bool
	}{
		{"right", &types.TableDescription{
			AttributeDefinitions: []types.AttributeDefinition{def("lease", "S")},
			KeySchema:            []types.KeySchemaElement{key("lease", "HASH")},
		}, true},
		{"other name", &types.TableDescription{
			AttributeDefinitions: []types.AttributeDefinition{def("pk", "S")},
			KeySchema:            []types.KeySchemaElement{key("pk", "HASH")},
		}, false},
		{"number key", &types.TableDescription{
			AttributeDefinitions: []types.AttributeDefinition{def("lease", "N")},
			KeySchema:            []types.KeySchemaElement{key("lease", "HASH")},
		}, false},
		{"sort key", &types.TableDescription{
			AttributeDefinitions: []types.AttributeDefinition{def("lease", "S"), def("sk", "S")},
			KeySchema:            []types.KeySchemaElement{key("lease", "HASH"), key("sk", "RANGE")},
		}, false},
		{"no description", nil, false},
	}
	for _, c := range cases {
		err := checkKeySchema(c.desc, "lease")
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.label, err, c.ok)
		}
	}
}
