// SPDX-License-Identifier: Apache-2.0

// Package larder is the Go client of Larder, a local HTTP server that hands
// each test a fresh, isolated SQLite store.
//
// It uses the standard library only. A Client talks to one server
// (LARDER_URL, default http://127.0.0.1:7464, with the bearer token
// LARDER_TOKEN when set); Client.CreateStore makes a store, and the Store's
// methods count, wait for, query, load, migrate, reset, diff, download, keep
// and delete it. Client.Build has the application's own migrator build a
// template database once per key, of which stores are then copies, and
// Client.CheckSnapshots checks old databases that the migrator migrates.
//
// In remote mode (LARDER_MODE=remote, Client.Mode, or a server URL whose
// host is not a loopback address; see Client.ResolveMode), for tests that
// cannot open the server's files, a store's Path is a local copy of it that
// Store.CheckIn hands back: see Store.
//
// The test helpers are in the subpackage lardertest, as net/http's are in
// httptest, so that this package does not import testing.
//
// Every method takes a context: cancel it or give it a deadline to bound a
// call. Without a Client.HTTPClient of your own, a request may take
// DefaultRequestTimeout (one the server holds for a wait gets the wait on
// top) and a download DefaultDownloadTimeout; with an HTTPClient that has a
// Timeout, a request the server holds gets the wait on top of that Timeout.
package larder

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// DefaultURL is the server address used when neither New's url nor
// LARDER_URL gives one.
const DefaultURL = "http://127.0.0.1:7464"

// DefaultRequestTimeout bounds one request when Client.HTTPClient is nil:
// twice the server's default operation limit (fixture loads, migrations,
// finishing a build), 60 s. A request the server holds for a wait gets the
// wait on top.
const DefaultRequestTimeout = 120 * time.Second

// DefaultDownloadTimeout bounds a download (Store.Artifact, a remote
// store's copy) or a check-in (Store.CheckIn) when Client.HTTPClient is nil.
const DefaultDownloadTimeout = 5 * time.Minute

// The HTTP clients used when Client.HTTPClient is nil (both on
// http.DefaultTransport).
var (
	defaultHTTPClient     = &http.Client{Timeout: DefaultRequestTimeout}
	downloadDefaultClient = &http.Client{Timeout: DefaultDownloadTimeout}
)

// Client talks to one Larder server. Its fields may be changed before first
// use; a Client is safe for concurrent use afterwards.
type Client struct {
	// URL is the server's base URL, without a trailing slash.
	URL string
	// Token, when not empty, is sent as "Authorization: Bearer <Token>".
	Token string
	// HTTPClient sends the requests. When nil, a client whose Timeout is
	// DefaultRequestTimeout (DefaultDownloadTimeout for a download or a
	// check-in) does.
	HTTPClient *http.Client
	// Mode says whether the stores the client makes are the server's files
	// (ModeLocal) or local copies of them (ModeRemote, for a test that
	// cannot open the server's files); the zero value, ModeAuto, leaves it
	// to LARDER_MODE, else to the URL: see ResolveMode. Mode beats
	// LARDER_MODE.
	Mode Mode
}

// New returns a client of the server at url with token. An empty url falls
// back to LARDER_URL, then to DefaultURL; an empty token falls back to
// LARDER_TOKEN (and no Authorization header is sent when that is empty too).
func New(url, token string) *Client {
	if url == "" {
		url = os.Getenv("LARDER_URL")
	}
	if url == "" {
		url = DefaultURL
	}
	if token == "" {
		token = os.Getenv("LARDER_TOKEN")
	}
	return &Client{URL: strings.TrimRight(url, "/"), Token: token}
}

// FromEnvironment returns a client configured by LARDER_URL and LARDER_TOKEN
// alone; it is New("", "").
func FromEnvironment() *Client { return New("", "") }

// Error is an answer of the server with a non-2xx status, as the contract's
// error body describes it: {"error": {"code", "message", "details"}}.
type Error struct {
	Status  int            // the HTTP status, e.g. 404
	Code    string         // e.g. "unknown_template", "store_not_found", "timeout"
	Message string         // the server's human-readable message
	Details map[string]any // code-specific details; never nil
}

func (e *Error) Error() string {
	return fmt.Sprintf("larder: %d %s: %s", e.Status, e.Code, e.Message)
}

// IsNotFound reports whether err is a *Error with status 404 (any of the
// not-found codes: store_not_found, unknown_template, ...).
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// newError reads an error answer. A body that is not the contract's error
// shape (a proxy's page, say) still gives an *Error, with code "http_error".
func newError(resp *http.Response) *Error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return errorOf(resp, raw)
}

// errorOf is the error answer resp whose body is raw.
func errorOf(resp *http.Response, raw []byte) *Error {
	return answerError(resp.StatusCode, resp.Status, raw)
}

// answerError is the error answer of status (its status line statusLine,
// "404 Not Found") whose body is raw.
func answerError(status int, statusLine string, raw []byte) *Error {
	var body struct {
		Error *struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	e := &Error{Status: status}
	if json.Unmarshal(raw, &body) == nil && body.Error != nil && body.Error.Code != "" {
		e.Code, e.Message, e.Details = body.Error.Code, body.Error.Message, body.Error.Details
	} else {
		e.Code = "http_error"
		e.Message = strings.TrimSpace(statusLine + " " + strings.TrimSpace(string(raw)))
	}
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	return e
}

// endpoint is the absolute URL of path (which starts with "/") with query.
func (c *Client) endpoint(path string, query url.Values) string {
	u := c.URL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return u
}

// send makes one request and returns the response when its status is 2xx;
// the caller closes its body. Any other status is returned as an *Error.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body any) (*http.Response, error) {
	return c.sendWaiting(ctx, method, path, query, body, 0)
}

// sendWaiting is send for a request that the server may hold for up to wait
// before answering (a long poll): see httpClient.
func (c *Client) sendWaiting(ctx context.Context, method, path string, query url.Values, body any, wait time.Duration) (*http.Response, error) {
	return c.sendWith(ctx, c.httpClient(wait), method, path, query, body)
}

// download is send for a GET whose answer is a file to stream: see
// downloadClient.
func (c *Client) download(ctx context.Context, path string) (*http.Response, error) {
	return c.sendWith(ctx, c.downloadClient(), http.MethodGet, path, nil, nil)
}

// rawBody is a request body sent as it is (an upload), not as JSON.
type rawBody struct {
	r           io.Reader
	size        int64
	contentType string
}

// sendWith is send through the HTTP client hc.
func (c *Client) sendWith(ctx context.Context, hc *http.Client, method, path string, query url.Values, body any) (*http.Response, error) {
	return c.sendAllowing(ctx, hc, method, path, query, body, 0)
}

// sendAllowing is sendWith that also returns the response of the status
// allowed (not 0): one whose body is an answer, not an error (a check's 422).
func (c *Client) sendAllowing(ctx context.Context, hc *http.Client, method, path string, query url.Values, body any, allowed int) (*http.Response, error) {
	var reader io.Reader
	contentType := "application/json"
	if raw, ok := body.(rawBody); ok {
		reader, contentType = raw.r, raw.contentType
	} else if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("larder: encoding the request body: %w", err)
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint(path, query), reader)
	if err != nil {
		return nil, fmt.Errorf("larder: %w", err)
	}
	if raw, ok := body.(rawBody); ok {
		req.ContentLength = raw.size
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("larder: %s %s: %w", method, path, err)
	}
	if (resp.StatusCode < 200 || resp.StatusCode > 299) && resp.StatusCode != allowed {
		defer resp.Body.Close()
		return nil, newError(resp)
	}
	return resp, nil
}

// httpClient is the HTTP client for a request that the server may hold for
// up to wait: HTTPClient (one whose Timeout is DefaultRequestTimeout when
// nil), or, when that has a Timeout, a copy of it (same transport) whose
// Timeout is longer by wait, so that a long poll is not cut off before the
// server answers it.
func (c *Client) httpClient(wait time.Duration) *http.Client {
	hc := c.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient
	}
	if wait <= 0 || hc.Timeout <= 0 {
		return hc
	}
	longer := *hc
	longer.Timeout += wait
	return &longer
}

// downloadClient is the HTTP client of a download: HTTPClient as it is, or,
// when nil, one whose Timeout is DefaultDownloadTimeout.
func (c *Client) downloadClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return downloadDefaultClient
}

// call makes one JSON request and decodes the JSON answer into out (unless
// out is nil or the answer has no body).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	return c.callWaiting(ctx, method, path, query, body, out, 0)
}

// callWaiting is call for a request that the server may hold for up to wait.
func (c *Client) callWaiting(ctx context.Context, method, path string, query url.Values, body, out any, wait time.Duration) error {
	resp, err := c.sendWaiting(ctx, method, path, query, body, wait)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeAnswer(resp, method, path, out)
}

// decodeAnswer decodes the JSON answer resp (to method path) into out,
// unless out is nil or the answer has no body.
func decodeAnswer(resp *http.Response, method, path string, out any) error {
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("larder: %s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// StoreOptions say how CreateStore makes a store. Every field is optional;
// only the fields that are set are sent (the zero StoreOptions gives an empty
// store).
type StoreOptions struct {
	// Template is the fixtures template to build the store from, e.g. "gallery".
	Template string
	// Fixtures are data fixtures of the template, applied in order.
	Fixtures []string
	// Version is the version to migrate to (the server's default is "latest").
	Version string
	// Snapshot starts the store from fixtures/<template>/snapshots/NAME.sqlite.
	Snapshot string
	// KeepSnapshotVersion sends "version": null, which leaves a Snapshot at
	// its own version instead of migrating it. Not with Version.
	KeepSnapshotVersion bool
	// Label names the store in listings and on the dashboard.
	Label string
	// Build is the key of a ready (or building) app-built template to copy
	// (see Client.Build); not with Template, Fixtures, Version, Snapshot or
	// From.
	Build string
	// BuildTimeout, when positive, is how long the server waits while the
	// Build is still building before it answers 408 "timeout" (sent as
	// "timeout_ms"; the server's default is 30 s). Only with Build.
	BuildTimeout time.Duration
	// From is the id of a live store to fork.
	From string
	// TTLSeconds, when positive, is the store's time to live.
	TTLSeconds int
}

func (o StoreOptions) body() map[string]any {
	b := map[string]any{}
	if o.Template != "" {
		b["template"] = o.Template
	}
	if o.Fixtures != nil {
		b["fixtures"] = o.Fixtures
	}
	if o.Version != "" {
		b["version"] = o.Version
	} else if o.KeepSnapshotVersion {
		b["version"] = nil
	}
	if o.Snapshot != "" {
		b["snapshot"] = o.Snapshot
	}
	if o.Label != "" {
		b["label"] = o.Label
	}
	if o.Build != "" {
		b["build"] = o.Build
	}
	if o.BuildTimeout > 0 {
		b["timeout_ms"] = milliseconds(o.BuildTimeout)
	}
	if o.From != "" {
		b["from"] = o.From
	}
	if o.TTLSeconds > 0 {
		b["ttl_seconds"] = o.TTLSeconds
	}
	return b
}

// serverWaitDefault is how long the server holds a wait that names no
// timeout_ms (a count wait, a store of a build still building).
const serverWaitDefault = 30 * time.Second

// milliseconds is d in whole milliseconds, at least 1, as timeout_ms takes it.
func milliseconds(d time.Duration) int64 {
	if ms := d.Milliseconds(); ms >= 1 {
		return ms
	}
	return 1
}

// CreateStore makes a store (POST /stores). With Build, the server waits
// while that build is still building (up to BuildTimeout, default 30 s).
//
// In remote mode (see ResolveMode) the store is then downloaded
// (GET /stores/{id}/database) into a fresh private folder,
// larder-remote-XXXX/store.sqlite under os.TempDir: the store's Path is that
// local copy, Info.Path the server's file. See Store for what that changes.
func (c *Client) CreateStore(ctx context.Context, opts StoreOptions) (*Store, error) {
	var wait time.Duration
	if opts.Build != "" {
		wait = serverWaitDefault
		if opts.BuildTimeout > 0 {
			wait = opts.BuildTimeout
		}
	}
	mode, err := c.ResolveMode()
	if err != nil {
		return nil, err
	}
	var info StoreInfo
	if err := c.callWaiting(ctx, http.MethodPost, "/stores", nil, opts.body(), &info, wait); err != nil {
		return nil, err
	}
	s := c.newStore(info)
	if mode == ModeRemote {
		if err := c.checkOutNew(ctx, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// GetStore returns the store with this id (GET /stores/{id}); a store that
// does not exist (or no longer) is a *Error with code "store_not_found".
// It makes no local copy, even in remote mode: its Path is the server's
// file, as Info.Path, and Remote is false.
func (c *Client) GetStore(ctx context.Context, id string) (*Store, error) {
	s := &Store{ID: id, client: c}
	if _, err := s.Refresh(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Health is the answer of GET /health.
type Health struct {
	Status        string `json:"status"`
	Version       string `json:"version"`
	SQLiteVersion string `json:"sqlite_version"`
	Stores        int64  `json:"stores"`
	// Storage says the root's file system and whether copies there share blocks.
	Storage HealthStorage `json:"storage"`
	// Cache says which bucket the server's templates are shared through, if any.
	Cache HealthCache `json:"cache"`
}

// HealthStorage is /health's "storage": the root's file system (nil when the
// server cannot tell) and whether a copy there shares its blocks (XFS with
// reflinks, btrfs): any size in well under a millisecond, taking no room.
type HealthStorage struct {
	FileSystem   *string `json:"file_system"`
	SharesBlocks bool    `json:"shares_blocks"`
}

// HealthCache is /health's "cache": the fleet's bucket (--cache-url), whether
// the server only reads it, and where kept stores' artifacts go; never credentials.
type HealthCache struct {
	URL          *string `json:"url"`
	ReadOnly     bool    `json:"read_only"`
	ArtifactsURL *string `json:"artifacts_url"`
}

// Health asks the server how it is (GET /health).
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if err := c.call(ctx, http.MethodGet, "/health", nil, nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// encodeValue turns []byte values (SQLite blobs) into the server's
// {"base64": "..."} form, inside slices and maps too; encoding/json would
// otherwise send them as plain base64 strings, which SQLite stores as text.
func encodeValue(v any) any {
	switch x := v.(type) {
	case []byte:
		if x == nil {
			return nil
		}
		return map[string]string{"base64": base64.StdEncoding.EncodeToString(x)}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = encodeValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = encodeValue(e)
		}
		return out
	default:
		return v
	}
}

// decodeValue turns a value of a decoder with UseNumber into the Go value of
// the SQLite value: nil, int64, float64, string or []byte.
func decodeValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		s := x.String()
		if !strings.ContainsAny(s, ".eE") {
			if n, err := x.Int64(); err == nil {
				return n
			}
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		if len(x) == 1 {
			if s, ok := x["base64"].(string); ok {
				if b, err := base64.StdEncoding.DecodeString(s); err == nil {
					return b
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = decodeValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = decodeValue(e)
		}
		return out
	default:
		return v
	}
}
