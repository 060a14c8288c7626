package tenure

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsNameEveryStore: the package doc, Config.Store's doc and the
// README's opening name every store the module has (lease/*lease), so that
// a store added is a store told.
func TestDocsNameEveryStore(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("lease", "*lease"))
	if err != nil || len(dirs) < 8 {
		t.Fatalf("lease/*lease: %v %v", dirs, err)
	}
	readme := map[string]string{ // package: what the README calls it
		"dynamolease": "**DynamoDB**", "s3lease": "**S3**", "pglease": "**PostgreSQL**", "etcdlease": "**etcd**",
		"gcslease": "**Cloud Storage**", "azbloblease": "**Azure Blob**", "filelease": "**directory**", "memlease": "**memory**",
		"k8slease": "**Kubernetes**", "redislease": "**Redis**", "natslease": "**NATS**",
	}
	texts := map[string]string{}
	for _, f := range []string{"doc.go", "config.go", "README.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(b)
	}
	opening, _, _ := strings.Cut(texts["README.md"], "## ")
	for _, d := range dirs {
		pkg := filepath.Base(d)
		for _, f := range []string{"doc.go", "config.go"} {
			if !strings.Contains(strings.ReplaceAll(texts[f], "\n\t// ", " "), "lease/"+pkg) {
				t.Errorf("%s does not name lease/%s", f, pkg)
			}
		}
		if w, ok := readme[pkg]; !ok || !strings.Contains(opening, w) {
			t.Errorf("the README's opening does not name lease/%s (as %q)", pkg, w)
		}
	}
}
