package sqlcommon

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one schema file, schema/NNNN_name.sql, which takes the schema to version NNNN.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// ReadMigrations returns the migrations in fsys's schema directory in version order. Versions
// must run 1, 2, 3, ... without gaps: a gap would mean a file went missing from the build.
func ReadMigrations(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, "schema")
	if err != nil {
		return nil, fmt.Errorf("read embedded schema: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		prefix, _, ok := strings.Cut(name, "_")
		if !ok || path.Ext(name) != ".sql" {
			return nil, fmt.Errorf("schema file %q is not named NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(prefix)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("schema file %q is not named NNNN_name.sql", name)
		}
		body, err := fs.ReadFile(fsys, "schema/"+name)
		if err != nil {
			return nil, fmt.Errorf("read schema file %q: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("schema files skip from version %d to %d (%s)", i, m.Version, m.Name)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no schema files embedded")
	}
	return ms, nil
}

// LatestSchemaVersion is the version the migrations in fsys's schema directory migrate to, 0 if
// they are unreadable.
func LatestSchemaVersion(fsys fs.FS) int {
	ms, err := ReadMigrations(fsys)
	if err != nil {
		return 0
	}
	return ms[len(ms)-1].Version
}

// CheckSchemaVersion refuses a database whose schema (at version current) is newer than the
// latest this binary knows: its code could misread the data.
func CheckSchemaVersion(current, latest int) error {
	if current > latest {
		return fmt.Errorf("database schema version %d is newer than this binary supports (%d): "+
			"run a vigil release that knows version %d, or restore a backup", current, latest, current)
	}
	return nil
}
