//go:build vigil_testhooks && unix

package history

import (
	"os"
	"strings"
)

// dialVia maps a history address to the address this host dials for it, from the
// history-via hooks of testHooksEnv ("history-via=<address>><through>", one per address): the
// chaos suite points one host's connections to another through a proxy it can cut, to sever
// that pair of hosts alone.
var dialVia = func() map[string]string {
	via := map[string]string{}
	for _, hook := range strings.Split(os.Getenv(testHooksEnv), ",") {
		v, ok := strings.CutPrefix(strings.TrimSpace(hook), "history-via=")
		if !ok {
			continue
		}
		if address, through, ok := strings.Cut(v, ">"); ok {
			via[address] = through
		}
	}
	return via
}()

// dialTarget is the address dialed for the history host at address.
func dialTarget(address string) string {
	if through, ok := dialVia[address]; ok {
		return through
	}
	return address
}
