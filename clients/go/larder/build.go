// SPDX-License-Identifier: Apache-2.0

package larder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// DefaultBuildTimeout is how long Build waits, by default, for another
// caller's build of the same key.
const DefaultBuildTimeout = 5 * time.Minute

// buildPoll is the longest single long poll of Build (GET /builds/{key}
// ?wait=ready): the server's default wait, well under its maximum.
const buildPoll = 30 * time.Second

// finishAttempts is how many times Build asks to finish a build that the
// server answers 409 "conflict" to (a connection of the migrator still
// holding a write transaction), waiting as Retry-After says in between:
// retryAfterDefault when it says nothing, at most retryAfterMax.
const finishAttempts = 5

const (
	retryAfterDefault = time.Second
	retryAfterMax     = 10 * time.Second
)

// discardTimeout bounds the DELETE with which Build discards the build of a
// failed migrate, made even when ctx has ended.
const discardTimeout = 30 * time.Second

// BuildInfo is an app-built template as the server describes it
// (POST /builds, GET /builds/{key}). State is "building" or "ready". Path,
// the file to build in, is only in the answer to the caller who builds;
// FinishedAt, Version (the newest migration the database's own bookkeeping
// names, e.g. django_migrations', if any), Counts and SizeBytes only once it
// is ready. Raw holds the whole answer, fields this type does not name
// included.
type BuildInfo struct {
	Key        string           `json:"key"`
	State      string           `json:"state"`
	Label      string           `json:"label"`
	Path       string           `json:"path"`
	StartedAt  time.Time        `json:"started_at"`
	ExpiresAt  time.Time        `json:"expires_at"`
	FinishedAt time.Time        `json:"finished_at"`
	Version    string           `json:"version"`
	Counts     map[string]int64 `json:"counts"`
	SizeBytes  int64            `json:"size_bytes"`
	// Origin of a ready build: "built" (finished through this server), "machine"
	// (found in the cache folder it shares) or "fleet" (downloaded from its bucket).
	Origin string            `json:"origin"`
	Links  map[string]string `json:"links"`
	Raw    map[string]any    `json:"-"`
}

// UnmarshalJSON fills the named fields and Raw.
func (i *BuildInfo) UnmarshalJSON(data []byte) error {
	type plain BuildInfo // without this method, so no recursion
	var p plain
	if err := unmarshalWithRaw(data, &p, &p.Raw); err != nil {
		return err
	}
	*i = BuildInfo(p) // all or nothing: a failed decode leaves i as it was
	return nil
}

// BuildOptions tune Build. Every field is optional.
type BuildOptions struct {
	// Label names the build in listings (sent when this caller starts it).
	Label string
	// Timeout bounds how long Build waits while another caller builds the
	// same key; DefaultBuildTimeout when zero or less. It does not bound
	// this caller's own migrate: ctx and the server's lease
	// (--build-lease-seconds) do.
	Timeout time.Duration
}

func buildPath(key, sub string) string {
	return "/builds/" + url.PathEscape(key) + sub
}

// Build makes sure the app-built template key exists, built by migrate, and
// returns it once ready; stores are then copies of it:
// CreateStore(ctx, StoreOptions{Build: key}). The key is the caller's
// fingerprint of what goes into the template (a hash of its migration
// files, say): 1 to 128 of A-Z a-z 0-9 . _ - (anything else is a *Error
// with status 400).
//
// Of all the callers of a key (goroutines, processes, CI jobs sharing the
// server), the first builds: migrate gets the path of an empty SQLite file
// (WAL mode), on the server's machine, to open with the application's own
// driver, run its migrator and fixtures in, commit and close (in remote mode
// such a build is handed back and the error is a *Error with Code
// "remote_mode": a build made by another caller is used as ever); Build then finishes the build
// (POST /builds/{key}/finish), retrying a few times while the server
// answers 409 "conflict" (a connection still writing). The other callers
// wait for it (long polls) and run nothing; one whose builder fails starts
// over and may build itself. A key already built answers at once.
//
// When migrate returns an error, or panics, the build is discarded
// (DELETE /builds/{key}, whose own error is ignored) so that the next
// caller builds again, and Build returns migrate's error wrapped (or the
// panic goes on). A build that cannot be finished is discarded too. When
// another caller's build is not ready within the timeout (BuildOptions;
// DefaultBuildTimeout) the error is a *TimeoutError; when ctx ends first,
// it is ctx's error, wrapped. At most one BuildOptions may be given.
func (c *Client) Build(ctx context.Context, key string, migrate func(ctx context.Context, path string) error, opts ...BuildOptions) (*BuildInfo, error) {
	if migrate == nil {
		return nil, errors.New("larder: Build needs a migrate function")
	}
	var o BuildOptions
	for _, opt := range opts {
		o = opt
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultBuildTimeout
	}
	deadline := time.Now().Add(timeout)
	var last *Error // the server's last 408 to a poll
	for {
		info, status, err := c.claimBuild(ctx, key, o.Label)
		if err != nil {
			return nil, err
		}
		switch status {
		case http.StatusOK:
			return info, nil
		case http.StatusCreated:
			if mode, err := c.ResolveMode(); err != nil || mode == ModeRemote {
				// The migrator would write the server's file: hand the claim back.
				_ = c.DiscardBuild(ctx, key)
				if err != nil {
					return nil, err
				}
				return nil, &Error{Code: "remote_mode", Details: map[string]any{"key": key},
					Message: fmt.Sprintf("build %s: in remote mode this client cannot build (the migrator would run on the server's file %s); "+
						"build it from a client on the server's machine, or check against a template or an uploaded store", key, info.Path)}
			}
			return c.runBuild(ctx, key, info.Path, migrate)
		}
		// 202: another caller builds; wait until it is no longer building.
		for {
			remaining := time.Until(deadline)
			if remaining <= 0 {
				return nil, buildTimeout(key, timeout, last)
			}
			poll := buildPoll
			if remaining < poll {
				poll = remaining
			}
			info, err := c.waitBuild(ctx, key, poll)
			var e *Error
			if err == nil {
				if info.State == "ready" {
					return info, nil
				}
				break // not building, not ready: ask again
			} else if errors.As(err, &e) && e.Status == http.StatusRequestTimeout && e.Code == "timeout" {
				last = e
				continue
			} else if errors.As(err, &e) && e.Status == http.StatusNotFound && e.Code == "unknown_build" {
				break // its builder failed, or its lease ran out: ask again, maybe build
			}
			return nil, err
		}
	}
}

// claimBuild is POST /builds: the build and the status, 201 (this caller
// builds), 202 (another does) or 200 (ready).
func (c *Client) claimBuild(ctx context.Context, key, label string) (*BuildInfo, int, error) {
	body := map[string]any{"key": key}
	if label != "" {
		body["label"] = label
	}
	resp, err := c.send(ctx, http.MethodPost, "/builds", nil, body)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	var info BuildInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return nil, 0, fmt.Errorf("larder: POST /builds: decoding the answer: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted:
		if resp.StatusCode == http.StatusCreated && info.Path == "" {
			return nil, 0, fmt.Errorf("larder: POST /builds: build %q to make has no path", key)
		}
		return &info, resp.StatusCode, nil
	}
	return nil, 0, fmt.Errorf("larder: POST /builds: unexpected status %s", resp.Status)
}

// runBuild runs migrate on the build this caller claimed and finishes it;
// whatever goes wrong (a panic included) discards the build.
func (c *Client) runBuild(ctx context.Context, key, path string, migrate func(ctx context.Context, path string) error) (info *BuildInfo, err error) {
	discard := true
	defer func() {
		if discard {
			c.discardQuietly(key)
		}
	}()
	if err := migrate(ctx, path); err != nil {
		return nil, fmt.Errorf("larder: building %q: %w", key, err)
	}
	info, err = c.finishBuild(ctx, key)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		discard = false // gone already (its lease ran out)
	}
	if err != nil {
		return nil, fmt.Errorf("larder: finishing build %q: %w", key, err)
	}
	discard = false
	return info, nil
}

// finishBuild is POST /builds/{key}/finish, asked again after a 409.
func (c *Client) finishBuild(ctx context.Context, key string) (*BuildInfo, error) {
	for attempt := 1; ; attempt++ {
		var info BuildInfo
		err := c.call(ctx, http.MethodPost, buildPath(key, "/finish"), nil, map[string]any{}, &info)
		var e *Error
		if err == nil || attempt == finishAttempts || !errors.As(err, &e) || e.Status != http.StatusConflict {
			if err != nil {
				return nil, err
			}
			return &info, nil
		}
		if perr := pause(ctx, retryPause(e)); perr != nil {
			return nil, fmt.Errorf("%w, waiting to ask again after: %v", perr, err)
		}
	}
}

// discardQuietly discards the build key, ignoring any error, with a context
// of its own: the caller's may be what ended its migrate.
func (c *Client) discardQuietly(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), discardTimeout)
	defer cancel()
	_ = c.DiscardBuild(ctx, key)
}

// waitBuild is the long poll GET /builds/{key}?wait=ready&timeout_ms=...
func (c *Client) waitBuild(ctx context.Context, key string, timeout time.Duration) (*BuildInfo, error) {
	q := url.Values{"wait": {"ready"}, "timeout_ms": {strconv.FormatInt(milliseconds(timeout), 10)}}
	var info BuildInfo
	if err := c.callWaiting(ctx, http.MethodGet, buildPath(key, ""), q, nil, &info, timeout); err != nil {
		return nil, err
	}
	return &info, nil
}

// buildTimeout is Build's *TimeoutError; last is the server's last 408, if
// a poll got one.
func buildTimeout(key string, timeout time.Duration, last *Error) *TimeoutError {
	if last == nil {
		last = &Error{
			Status:  http.StatusRequestTimeout,
			Code:    "timeout",
			Message: fmt.Sprintf("build '%s' was still building after %v", key, timeout),
			Details: map[string]any{"key": key},
		}
	}
	return &TimeoutError{Condition: "build " + key + " ready", Timeout: timeout, Err: last}
}

// Builds lists the app-built templates, building and ready, by key
// (GET /builds).
func (c *Client) Builds(ctx context.Context) ([]BuildInfo, error) {
	var a struct {
		Builds []BuildInfo `json:"builds"`
	}
	if err := c.call(ctx, http.MethodGet, "/builds", nil, nil, &a); err != nil {
		return nil, err
	}
	return a.Builds, nil
}

// GetBuild returns the app-built template key (GET /builds/{key}); one that
// does not exist (or no longer) is a *Error with code "unknown_build".
func (c *Client) GetBuild(ctx context.Context, key string) (*BuildInfo, error) {
	var info BuildInfo
	if err := c.call(ctx, http.MethodGet, buildPath(key, ""), nil, nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// DiscardBuild throws the app-built template key away, building or ready
// (DELETE /builds/{key}); the next Build of the key builds it again. Stores
// made of it stay. One that does not exist is a *Error with code
// "unknown_build".
func (c *Client) DiscardBuild(ctx context.Context, key string) error {
	return c.call(ctx, http.MethodDelete, buildPath(key, ""), nil, nil, nil)
}
