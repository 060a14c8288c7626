package servers

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The users of the etcd server with authentication on: root may do
// anything; tenure may log in and nothing else.
const (
	EtcdRootPassword   = "tenure-root"
	EtcdTenurePassword = "tenure-pw"
)

// etcdAuthSetup makes the users and turns authentication on, through
// etcd's JSON gateway (so that this command does not build etcd's client).
// A step that was done already (an earlier try got that far) is skipped.
func etcdAuthSetup(addr string) error {
	client := &http.Client{Timeout: 5 * time.Second}
	call := func(path, body string) error {
		resp, err := client.Post("http://"+addr+"/v3/"+path, "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK && !strings.Contains(string(b), "already exists") {
			return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, b)
		}
		return nil
	}
	for _, step := range [][2]string{
		{"auth/user/add", `{"name":"root","password":"` + EtcdRootPassword + `"}`},
		{"auth/user/grant", `{"user":"root","role":"root"}`},
		{"auth/role/add", `{"name":"nothing"}`},
		{"auth/user/add", `{"name":"tenure","password":"` + EtcdTenurePassword + `"}`},
		{"auth/user/grant", `{"user":"tenure","role":"nothing"}`},
		{"auth/enable", `{}`},
	} {
		if err := call(step[0], step[1]); err != nil {
			return err
		}
	}
	return nil
}
