package store

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// File is the name of the database inside a suite directory.
const File = "proctor.db"

const (
	// dbName is the database file inside DIR.
	dbName = File
	// applicationID marks a Proctor store: "PRCT" (PRAGMA application_id).
	applicationID = 0x50524354
	// schemaVersion is the PRAGMA user_version this package writes and
	// the newest it reads.
	schemaVersion = 1
	// busyTimeoutMS is how long a statement waits for a lock held by
	// another connection (there is none in normal use).
	busyTimeoutMS = 10000
)

// schema is schema version 1. Trial IDs are the plan order: trials are
// inserted by index, then task, then agent, so "lowest pending ID" is the
// next trial to run.
const schema = `
CREATE TABLE suite (
	id      INTEGER PRIMARY KEY CHECK (id = 1),
	trials  INTEGER NOT NULL CHECK (trials > 0),
	options BLOB,
	created INTEGER NOT NULL -- unix nanoseconds
);
CREATE TABLE agents (
	pos     INTEGER PRIMARY KEY,
	name    TEXT NOT NULL UNIQUE,
	command TEXT NOT NULL
);
CREATE TABLE tasks (
	pos    INTEGER PRIMARY KEY,
	name   TEXT NOT NULL UNIQUE,
	dir    TEXT NOT NULL,
	digest TEXT NOT NULL
);
CREATE TABLE trials (
	id            INTEGER PRIMARY KEY,
	agent         TEXT NOT NULL REFERENCES agents(name),
	task          TEXT NOT NULL REFERENCES tasks(name),
	idx           INTEGER NOT NULL CHECK (idx >= 0),
	state         TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done', 'failed')),
	attempt       INTEGER NOT NULL DEFAULT 0,
	started       INTEGER, -- unix nanoseconds
	ended         INTEGER,
	status        TEXT,
	passed        INTEGER,
	reward        REAL,
	wall_ms       INTEGER,
	agent_ms      INTEGER,
	grader_ms     INTEGER,
	model_calls   INTEGER,
	input_tokens  INTEGER,
	output_tokens INTEGER,
	violations    TEXT, -- JSON array of kinds
	out           TEXT,
	bundle_sha256 TEXT,
	error         TEXT,
	UNIQUE (agent, task, idx)
);
CREATE INDEX trials_state ON trials (state, id);
`

// Store is an open results store. It holds DIR's lock from Open until
// Close. Its methods are safe for concurrent use by several goroutines;
// the one SQLite connection serialises them.
type Store struct {
	dir  string
	path string
	db   *sql.DB
	lock *os.File
}

// Open opens the store in dir, creating dir/proctor.db when it does not
// exist. It takes an exclusive lock on dir for as long as the Store is
// open; if another Store holds it, Open returns a *LockedError. A
// proctor.db that is not a Proctor store (not SQLite, another
// application's database, a newer schema version, or one that fails
// PRAGMA quick_check) gives an error wrapping ErrNotStore; such a file is
// never modified.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	lock, err := lockDir(abs)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: abs, path: filepath.Join(abs, dbName), lock: lock}
	if err := s.open(); err != nil {
		s.unlock()
		return nil, err
	}
	return s, nil
}

func (s *Store) open() error {
	if _, err := os.Lstat(s.path); errors.Is(err, os.ErrNotExist) {
		if err := create(s.path); err != nil {
			return fmt.Errorf("creating %s: %w", s.path, err)
		}
	} else if err != nil {
		return fmt.Errorf("opening store: %w", err)
	}
	if err := check(s.path); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", dsn(s.path, "mode=rw",
		"_pragma=journal_mode(WAL)", "_pragma=synchronous(FULL)", "_pragma=foreign_keys(1)"))
	if err != nil {
		return fmt.Errorf("opening %s: %w", s.path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.Ping(); err != nil {
		db.Close()
		return fmt.Errorf("opening %s: %w", s.path, err)
	}
	s.db = db
	return nil
}

// Close closes the database and then releases the lock.
func (s *Store) Close() error {
	err := s.db.Close()
	if err != nil {
		err = fmt.Errorf("closing %s: %w", s.path, err)
	}
	return errors.Join(err, s.unlock())
}

func (s *Store) unlock() error {
	// Leave no stale pid behind; the flock, not the pid, is the lock.
	_ = s.lock.Truncate(0)
	return s.lock.Close()
}

// dsn is the driver name for path with the given query parameters, as a
// file: URI so that SQLite honours mode=.
func dsn(path string, params ...string) string {
	u := url.URL{Scheme: "file", Path: path}
	params = append([]string{fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeoutMS)}, params...)
	return u.String() + "?" + strings.Join(params, "&")
}

// check opens path read-only and fails with a *NotStoreError unless it is
// a Proctor store of a schema version this package reads that passes
// PRAGMA quick_check. Nothing is written to path.
func check(path string) error {
	notStore := func(reason string, err error) error {
		return &NotStoreError{Path: path, Reason: reason, Err: err}
	}
	// Look at the magic ourselves first: SQLite's own message for a text
	// file is vague, and an empty file would be taken as a new database.
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening store: %w", err)
	}
	var head [100]byte
	n, err := io.ReadFull(f, head[:])
	f.Close()
	switch {
	case n == 0:
		return notStore("empty file", nil)
	case err != nil && !errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("reading %s: %w", path, err)
	case n < len(head) || string(head[:16]) != "SQLite format 3\x00":
		return notStore("not an SQLite database", nil)
	}

	db, err := sql.Open("sqlite", dsn(path, "mode=ro"))
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	sqlErr := func(what string, err error) error {
		var se *sqlite.Error
		if errors.As(err, &se) {
			switch se.Code() & 0xff {
			case sqlite3.SQLITE_NOTADB:
				return notStore("not an SQLite database", err)
			case sqlite3.SQLITE_CORRUPT:
				return notStore("corrupt: "+oneLine(se.Error()), err)
			}
		}
		return fmt.Errorf("checking %s: %s: %w", path, what, err)
	}
	var appID, version int64
	if err := db.QueryRow("PRAGMA application_id").Scan(&appID); err != nil {
		return sqlErr("reading application_id", err)
	}
	if appID != applicationID {
		return notStore(fmt.Sprintf("application_id is %#08x, not proctor's %#08x (another program's SQLite database)", uint32(appID), applicationID), nil)
	}
	if err := db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		return sqlErr("reading user_version", err)
	}
	if version > schemaVersion {
		return notStore(fmt.Sprintf("schema version %d is newer than this proctor reads (%d); use a newer proctor", version, schemaVersion), nil)
	}
	if version < 1 {
		return notStore(fmt.Sprintf("schema version %d is unknown", version), nil)
	}
	rows, err := db.Query("PRAGMA quick_check(5)")
	if err != nil {
		return sqlErr("running quick_check", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return sqlErr("running quick_check", err)
		}
		if line != "ok" {
			problems = append(problems, oneLine(line))
		}
	}
	if err := rows.Err(); err != nil {
		return sqlErr("running quick_check", err)
	}
	if len(problems) > 0 {
		return notStore("corrupt: quick_check: "+strings.Join(problems, "; "), nil)
	}
	return nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// create builds an empty store in path+".new" and renames it into place,
// so that path either does not exist or is a complete store. The caller
// holds DIR's lock, so the temporary files are ours to replace.
func create(path string) error {
	tmp := path + ".new"
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		if err := os.Remove(tmp + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	db, err := sql.Open("sqlite", dsn(tmp, "_pragma=synchronous(FULL)"))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	_, err = db.Exec("BEGIN;" + schema +
		fmt.Sprintf("PRAGMA application_id = %d; PRAGMA user_version = %d; COMMIT;", applicationID, schemaVersion))
	if err != nil {
		db.Close()
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	if err := syncPath(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncPath(filepath.Dir(path))
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}
