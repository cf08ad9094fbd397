// SPDX-License-Identifier: Apache-2.0

package larder

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Remote mode (issue 47): for a test that cannot open the server's files (a
// server on another host, a test in a container or an emulator), a store is
// a local copy of the server's (GET /stores/{id}/database) that the test
// hands back with Store.CheckIn (PUT /stores/{id}/database).

// Mode says whether a client's stores are the server's own files (ModeLocal)
// or local copies of them (ModeRemote). The zero Mode, ModeAuto, leaves it to
// LARDER_MODE, else to the server's URL: see Client.ResolveMode.
type Mode string

const (
	// ModeAuto is LARDER_MODE when set, else remote for a server whose host
	// is not a loopback address and local for one that is.
	ModeAuto Mode = ""
	// ModeLocal: a store's Path is the server's live file, which the test
	// opens on the same machine.
	ModeLocal Mode = "local"
	// ModeRemote: a store's Path is a local copy of the server's file,
	// handed back with Store.CheckIn.
	ModeRemote Mode = "remote"
)

// modeVariable is the environment variable that sets the mode.
const modeVariable = "LARDER_MODE"

// parseMode is the Mode a LARDER_MODE value names: "remote", "local", or ""
// (ModeAuto); anything else is an error naming the variable and the two
// values.
func parseMode(value string) (Mode, error) {
	switch Mode(value) {
	case ModeAuto, ModeLocal, ModeRemote:
		return Mode(value), nil
	}
	return ModeAuto, fmt.Errorf("larder: %s is %q: set it to %q or %q (or leave it unset: remote for a server that is not on this machine's loopback address)", modeVariable, value, ModeRemote, ModeLocal)
}

// ResolveMode is the mode of the stores c makes, ModeLocal or ModeRemote:
// c.Mode when set; else LARDER_MODE when set ("remote" or "local"; any
// other value is an error); else ModeLocal when the host of c.URL is a
// loopback address (localhost, 127.0.0.0/8, ::1) and ModeRemote when it is
// not. A server the test helpers start themselves is on the loopback
// address, hence local unless LARDER_MODE (or TestServer.Mode) says remote.
func (c *Client) ResolveMode() (Mode, error) {
	if c.Mode != ModeAuto {
		if c.Mode != ModeLocal && c.Mode != ModeRemote {
			return ModeAuto, fmt.Errorf("larder: Client.Mode is %q: want larder.ModeRemote, larder.ModeLocal or larder.ModeAuto", string(c.Mode))
		}
		return c.Mode, nil
	}
	mode, err := parseMode(os.Getenv(modeVariable))
	if err != nil || mode != ModeAuto {
		return mode, err
	}
	if isLoopbackURL(c.URL) {
		return ModeLocal, nil
	}
	return ModeRemote, nil
}

// isLoopbackURL reports whether the host of the URL rawURL is a loopback
// address: localhost, an address of 127.0.0.0/8, or ::1.
func isLoopbackURL(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// The local copy's files: the database, and SQLite's files beside it.
const (
	copyName       = "store.sqlite"
	walSuffix      = "-wal"
	shmSuffix      = "-shm"
	copyDirPattern = "larder-remote-*"
)

// localCopy is a remote store's local copy: dir/store.sqlite. mu orders the
// calls that check it in or out, so that each sees the other's whole work.
type localCopy struct {
	mu     sync.Mutex
	dir    string
	synced fileState // the files as last checked out or in
	closed bool      // removed: by Close or Delete
}

// fileState is what tells that the copy changed: the size and modification
// time of the database and of its -wal (size 0 when there is none).
type fileState struct {
	size    int64
	mod     time.Time
	walSize int64
	walMod  time.Time
}

// stateOf is the fileState of the database at path.
func stateOf(path string) (fileState, error) {
	st, err := os.Stat(path)
	if err != nil {
		return fileState{}, err
	}
	s := fileState{size: st.Size(), mod: st.ModTime()}
	if wal, err := os.Stat(path + walSuffix); err == nil && wal.Size() > 0 {
		s.walSize, s.walMod = wal.Size(), wal.ModTime()
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fileState{}, err
	}
	return s, nil
}

func (a fileState) equal(b fileState) bool {
	return a.size == b.size && a.mod.Equal(b.mod) && a.walSize == b.walSize && a.walMod.Equal(b.walMod)
}

// checkOutNew gives the store s, just made on the server, a local copy in
// a fresh private folder; when that fails the store is deleted again.
func (c *Client) checkOutNew(ctx context.Context, s *Store) error {
	dir, err := os.MkdirTemp("", copyDirPattern) // 0700
	if err != nil {
		_ = s.deleteQuietly()
		return fmt.Errorf("larder: store %s: making the folder of its local copy: %w", s.ID, err)
	}
	s.remote = &localCopy{dir: dir}
	s.Path = filepath.Join(dir, copyName)
	if err := s.checkOut(ctx); err != nil {
		_ = os.RemoveAll(dir)
		_ = s.deleteQuietly()
		return err
	}
	return nil
}

// deleteQuietly deletes the store on the server, with a context of its own
// (the caller's may be what failed).
func (s *Store) deleteQuietly() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.client.call(ctx, http.MethodDelete, s.path(""), nil, nil, nil)
}

// Remote reports whether the store is a local copy of the server's (remote
// mode): Path is then that copy, Info.Path the server's file, and
// CheckIn hands the copy back.
func (s *Store) Remote() bool { return s.remote != nil }

// sha256Header carries the SHA-256 of a database the server sends.
const sha256Header = "X-Larder-SHA256"

// checkOut downloads the store (GET /stores/{id}/database) over the local
// copy (checked against the SHA-256 the server sends with it, if any): into
// a temporary file of the copy's folder, renamed over
// store.sqlite once complete, after removing the copy's -wal and -shm
// (which belong to the old file). The caller holds s.remote.mu, or owns s.
func (s *Store) checkOut(ctx context.Context) (err error) {
	r := s.remote
	resp, err := s.client.download(ctx, s.path("/database"))
	if err != nil {
		return fmt.Errorf("larder: store %s: downloading its database: %w", s.ID, err)
	}
	defer resp.Body.Close()
	f, err := os.CreateTemp(r.dir, "."+copyName+".*.part")
	if err != nil {
		return fmt.Errorf("larder: store %s: %w", s.ID, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	sum := sha256.New()
	if _, err = io.Copy(io.MultiWriter(f, sum), resp.Body); err != nil {
		return fmt.Errorf("larder: store %s: downloading its database: %w", s.ID, err)
	}
	if want := resp.Header.Get(sha256Header); want != "" && !strings.EqualFold(want, hex.EncodeToString(sum.Sum(nil))) {
		err = fmt.Errorf("larder: store %s: the database downloaded does not have the SHA-256 the server sent (%s)", s.ID, want)
		return err
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("larder: store %s: %w", s.ID, err)
	}
	// A -wal left beside the new file would be read as its own.
	for _, stale := range []string{s.Path + walSuffix, s.Path + shmSuffix} {
		if err = os.Remove(stale); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("larder: store %s: removing the old copy's %s: %w", s.ID, filepath.Base(stale), err)
		}
	}
	if err = os.Rename(f.Name(), s.Path); err != nil {
		return fmt.Errorf("larder: store %s: %w", s.ID, err)
	}
	state, err := settle(s.Path)
	if err != nil {
		return fmt.Errorf("larder: store %s: %w", s.ID, err)
	}
	r.synced = state
	return nil
}

// settleBack is how far settle sets modification times back: well over any
// file system's timestamp granularity.
const settleBack = 3 * time.Second

// settle sets the modification times of the database at path and of its
// -wal back by settleBack, so that a write that follows at once, within
// the file system's timestamp granularity and not changing the size,
// still changes its fileState; answers that state.
func settle(path string) (fileState, error) {
	past := time.Now().Add(-settleBack)
	for _, f := range []string{path, path + walSuffix} {
		if err := os.Chtimes(f, past, past); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fileState{}, err
		}
	}
	return stateOf(path)
}

// CheckIn hands the local copy of a remote store back to the server
// (PUT /stores/{id}/database): the server's store becomes the copy, all or
// nothing, and Info is updated from the answer. A copy with a non-empty
// store.sqlite-wal beside it is sent as a zip of the two
// (application/zip); one without, as the file itself
// (application/vnd.sqlite3). The store's creation state stays the server's,
// so Diff, Reset, Artifact and checks compare the copy against what the
// store was made as.
//
// Close every connection of yours to Path first (or at least let no write
// run): a copy read while a connection writes may be torn, and the server
// refuses a database that is not sound (a *Error with status 400, 415 or
// 422; 413 when too big; 429 over the server's disk limit). While something
// on the server holds a write transaction on the store (409 "conflict"),
// CheckIn asks again a few times, as Retry-After says.
//
// In local mode (Remote() false) there is nothing to hand back: CheckIn
// does nothing and returns nil.
func (s *Store) CheckIn(ctx context.Context) error {
	r := s.remote
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("larder: store %s: its local copy was removed (Close or Delete): nothing to check in", s.ID)
	}
	return s.checkIn(ctx)
}

// checkInIfChanged checks the copy in when its files changed since it was
// last checked out or in. The caller holds s.remote.mu.
func (s *Store) checkInIfChanged(ctx context.Context) error {
	r := s.remote
	if r.closed {
		return nil
	}
	now, err := stateOf(s.Path)
	if err != nil {
		return fmt.Errorf("larder: store %s: its local copy: %w", s.ID, err)
	}
	if now.equal(r.synced) {
		return nil
	}
	return s.checkIn(ctx)
}

// checkIn is CheckIn's work; the caller holds s.remote.mu.
func (s *Store) checkIn(ctx context.Context) error {
	state, err := stateOf(s.Path)
	if err != nil {
		return fmt.Errorf("larder: checking in store %s: its local copy: %w", s.ID, err)
	}
	body := s.Path
	contentType := "application/vnd.sqlite3"
	if state.walSize > 0 {
		bundle, err := s.bundle(state)
		if err != nil {
			return fmt.Errorf("larder: checking in store %s: %w", s.ID, err)
		}
		defer os.Remove(bundle)
		body, contentType = bundle, "application/zip"
	}
	var info StoreInfo
	err = withConflictRetries(ctx, func() error {
		return s.client.putFile(ctx, s.path("/database"), body, contentType, &info)
	})
	if err != nil {
		return fmt.Errorf("larder: checking in store %s: %w", s.ID, err)
	}
	s.setInfo(info)
	// What was sent is now the server's: unless the files changed meanwhile
	// (a write during the check-in), the next change must tell from it.
	s.remote.synced = state
	if now, err := stateOf(s.Path); err == nil && now.equal(state) {
		if settled, err := settle(s.Path); err == nil {
			s.remote.synced = settled
		}
	}
	return nil
}

// bundle writes a zip of the copy's database and -wal, as state found them,
// with stored (uncompressed) entries store.sqlite and store.sqlite-wal, to a
// temporary file of the copy's folder, and answers its path.
func (s *Store) bundle(state fileState) (path string, err error) {
	f, err := os.CreateTemp(s.remote.dir, ".check-in.*.zip")
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	z := zip.NewWriter(f)
	for _, e := range []struct {
		name string
		size int64
		mod  time.Time
	}{{copyName, state.size, state.mod}, {copyName + walSuffix, state.walSize, state.walMod}} {
		if err := addStored(z, filepath.Join(s.remote.dir, e.name), e.name, e.size, e.mod); err != nil {
			return "", err
		}
	}
	if err := z.Close(); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// addStored adds the first size bytes of the file at path to z as the
// stored entry name, its CRC-32 and sizes in its local header (no data
// descriptor), which every zip reader takes.
func addStored(z *zip.Writer, path, name string, size int64, mod time.Time) error {
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	sum := crc32.NewIEEE()
	if n, err := io.Copy(sum, io.NewSectionReader(src, 0, size)); err != nil {
		return err
	} else if n != size {
		return fmt.Errorf("%s changed while it was read (%d bytes, not %d): close the connections to it", name, n, size)
	}
	w, err := z.CreateRaw(&zip.FileHeader{
		Name:               name,
		Method:             zip.Store,
		Modified:           mod,
		CRC32:              sum.Sum32(),
		CompressedSize64:   uint64(size),
		UncompressedSize64: uint64(size),
	})
	if err != nil {
		return err
	}
	if n, err := io.Copy(w, io.NewSectionReader(src, 0, size)); err != nil {
		return err
	} else if n != size {
		return fmt.Errorf("%s changed while it was read (%d bytes, not %d): close the connections to it", name, n, size)
	}
	return nil
}

// putFile sends the file at path as the body of PUT path and decodes the
// JSON answer into out.
func (c *Client) putFile(ctx context.Context, path, file, contentType string, out any) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	body := rawBody{r: f, size: st.Size(), contentType: contentType}
	resp, err := c.sendWith(ctx, c.downloadClient(), http.MethodPut, path, nil, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeAnswer(resp, http.MethodPut, path, out)
}

// Close removes the local copy of a remote store and its folder; the store
// itself stays on the server (Delete removes both). Path is gone afterwards,
// CheckIn an error, and the other methods work on the server's store alone.
// In local mode Close does nothing. Close your own connections to Path first.
func (s *Store) Close() error {
	r := s.remote
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return s.removeCopy()
}

// removeCopy removes the local copy's folder; the caller holds s.remote.mu.
func (s *Store) removeCopy() error {
	r := s.remote
	if r.closed {
		return nil
	}
	r.closed = true
	if err := os.RemoveAll(r.dir); err != nil {
		return fmt.Errorf("larder: store %s: removing its local copy: %w", s.ID, err)
	}
	return nil
}

// serverChange runs change, a call that changes the store on the server
// (Load, Migrate, a Query), keeping a remote store's local copy the test's
// working copy: the copy is checked in first when it changed since it was
// last checked out or in (unless before is false), and downloaded over the
// copy afterwards when change answers true. In local mode it is change.
func (s *Store) serverChange(ctx context.Context, what string, before bool, change func() (bool, error)) error {
	r := s.remote
	if r == nil {
		_, err := change()
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if before {
		if err := s.checkInIfChanged(ctx); err != nil {
			return fmt.Errorf("%w (before %s: the local copy had changed)", err, what)
		}
	}
	changed, err := change()
	if err != nil || !changed || r.closed {
		return err
	}
	if err := s.checkOut(ctx); err != nil {
		return fmt.Errorf("%w (after %s: the local copy is not up to date)", err, what)
	}
	return nil
}

// withConflictRetries runs call again while the server answers 409
// "conflict" (a write transaction is open on the store), up to
// finishAttempts times, pausing as Retry-After says in between.
func withConflictRetries(ctx context.Context, call func() error) error {
	for attempt := 1; ; attempt++ {
		err := call()
		var e *Error
		if err == nil || attempt == finishAttempts || !errors.As(err, &e) || e.Status != http.StatusConflict {
			return err
		}
		if perr := pause(ctx, retryPause(e)); perr != nil {
			return fmt.Errorf("%w, waiting to ask again after: %v", perr, err)
		}
	}
}

// retryPause is how long to wait before asking again after the 409 e:
// its retry_after_seconds (Retry-After), retryAfterDefault when it says
// nothing, at most retryAfterMax.
func retryPause(e *Error) time.Duration {
	d := retryAfterDefault
	if s, ok := e.Details["retry_after_seconds"].(float64); ok && s >= 0 {
		d = time.Duration(s * float64(time.Second))
	}
	if d > retryAfterMax {
		d = retryAfterMax
	}
	return d
}

// pause waits d, or until ctx ends (then its error).
func pause(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
