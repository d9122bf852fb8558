// Package buildinfo says which build of vigil is running: its version, the commit it was built
// from and when. Release builds stamp the three variables with -ldflags -X; a plain `go build`
// leaves them empty and they are read from the module's embedded build information instead.
package buildinfo

import (
	"runtime/debug"
	"sync"
)

// Stamped by the linker in release builds and by `make build`:
//
//	-X github.com/vigilhq/vigil/common/buildinfo.Version=v0.1.0
//	-X github.com/vigilhq/vigil/common/buildinfo.Commit=<sha>
//	-X github.com/vigilhq/vigil/common/buildinfo.Date=<RFC 3339>
var (
	Version string
	Commit  string
	Date    string
)

// Info is one build's identity.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
}

var (
	once sync.Once
	info Info
)

// Get returns the running build's identity. Fields the linker did not stamp come from the
// binary's embedded build information (the main module's version, vcs.revision, vcs.time);
// what neither knows is "unknown", except Version, which is "devel" for an unstamped build.
func Get() Info {
	once.Do(func() {
		info = Info{Version: Version, Commit: Commit, Date: Date}
		if bi, ok := debug.ReadBuildInfo(); ok {
			info.GoVersion = bi.GoVersion
			if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				info.Version = bi.Main.Version
			}
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					if info.Commit == "" {
						info.Commit = s.Value
					}
				case "vcs.time":
					if info.Date == "" {
						info.Date = s.Value
					}
				}
			}
		}
		if info.Version == "" {
			info.Version = "devel"
		}
		if info.Commit == "" {
			info.Commit = "unknown"
		}
		if info.Date == "" {
			info.Date = "unknown"
		}
	})
	return info
}
