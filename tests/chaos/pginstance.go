package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigilhq/vigil/tests/freeport"
)

// pgInstance is a PostgreSQL server the suite owns: its own data directory under the run's
// directory, on a free loopback port, so that restarting it disturbs no other user of the
// machine's PostgreSQL. As root it runs as the postgres user, since PostgreSQL refuses root.
type pgInstance struct {
	bin, data, sockets, logPath string
	port                        int
	cred                        *syscall.Credential // nil: as the suite's own user
}

// findPGBin returns the bin directory of the newest PostgreSQL installed under
// /usr/lib/postgresql, or dir when it is set.
func findPGBin(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(found) == 0 {
		return "", errors.New("no PostgreSQL binaries under /usr/lib/postgresql/*/bin (initdb, pg_ctl)")
	}
	sort.Slice(found, func(i, j int) bool { return versionOf(found[i]) < versionOf(found[j]) })
	return filepath.Dir(found[len(found)-1]), nil
}

func versionOf(pgCtl string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(pgCtl))))
	return v
}

// startPGInstance initialises a data directory under dir and starts PostgreSQL on it.
func startPGInstance(ctx context.Context, binDir, dir string) (*pgInstance, error) {
	bin, err := findPGBin(binDir)
	if err != nil {
		return nil, err
	}
	port, err := freeport.Port()
	if err != nil {
		return nil, err
	}
	pg := &pgInstance{bin: bin, data: filepath.Join(dir, "pgdata"), sockets: filepath.Join(dir, "pgsock"),
		logPath: filepath.Join(dir, "postgres.log"), port: port}
	for _, d := range []string{pg.data, pg.sockets} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("PostgreSQL refuses to run as root and there is no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		pg.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// The postgres user must reach the data directory through every parent the run made.
		// Only the directories the run made below the temp dir are opened (search only).
		tmp := filepath.Clean(os.TempDir()) + string(filepath.Separator)
		for d := filepath.Clean(dir); strings.HasPrefix(d, tmp); d = filepath.Dir(d) {
			if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
				_ = os.Chmod(d, st.Mode().Perm()|0o011)
			}
		}
		for _, p := range []string{pg.data, pg.sockets} {
			if err := os.Chown(p, uid, gid); err != nil {
				return nil, err
			}
		}
		if f, err := os.Create(pg.logPath); err == nil {
			_ = f.Close()
			_ = os.Chown(pg.logPath, uid, gid)
		}
	}
	if out, err := pg.run(ctx, "initdb", "-D", pg.data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if err := pg.start(ctx); err != nil {
		return nil, err
	}
	return pg, nil
}

// DSN is the URL of the instance's postgres database.
func (pg *pgInstance) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

func (pg *pgInstance) run(ctx context.Context, tool string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(pg.bin, tool), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	cmd.Dir = pg.sockets
	return cmd.CombinedOutput()
}

func (pg *pgInstance) options() string {
	// fsync off: the instance lives for one run, and a clean shutdown (what restart does)
	// writes every page anyway; it keeps the suite from waiting on a shared disk.
	return fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", pg.port, pg.sockets)
}

func (pg *pgInstance) start(ctx context.Context) error {
	if out, err := pg.run(ctx, "pg_ctl", "start", "-w", "-t", "120", "-D", pg.data, "-l", pg.logPath, "-o", pg.options()); err != nil {
		return fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	return pg.waitServing(ctx, 2*time.Minute)
}

// restart stops the server (fast shutdown: every connection is closed, every open transaction
// rolled back, as a restart by an operator does) and starts it again; it returns once the
// server accepts connections.
func (pg *pgInstance) restart(ctx context.Context) error {
	if out, err := pg.run(ctx, "pg_ctl", "restart", "-w", "-t", "120", "-m", "fast", "-D", pg.data, "-l", pg.logPath, "-o", pg.options()); err != nil {
		return fmt.Errorf("pg_ctl restart: %v\n%s", err, out)
	}
	return pg.waitServing(ctx, 2*time.Minute)
}

func (pg *pgInstance) waitServing(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(callCtx, pg.DSN())
		cancel()
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("PostgreSQL on port %d not serving after %v: %v", pg.port, within, err)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// stop shuts the server down at once and leaves the data directory to the run's cleanup.
func (pg *pgInstance) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = pg.run(ctx, "pg_ctl", "stop", "-w", "-m", "immediate", "-D", pg.data)
}
