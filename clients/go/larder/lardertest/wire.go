// SPDX-License-Identifier: Apache-2.0

package lardertest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/larder-dev/larder/clients/go/internal/hook"
	"github.com/larder-dev/larder/clients/go/larder"
)

// Main's background requests to a server on this machine (a loopback
// address): each one written and its answer read on a kept-alive
// connection by the goroutine that makes it, with no more. net/http's
// Transport hands every request to two goroutines of its connection, and
// on two cores that costs more than the rest of a store's making: a third
// of the time a store made ahead took to come, and twice the CPU.

// wires are the idle connections, by server address.
var wires struct {
	mu   sync.Mutex
	idle map[string][]*wire
}

// maxIdleWires per server: the deletes under way, the store made ahead, one spare.
const maxIdleWires = maxPendingDeletes + 2

type wire struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	used bool // has carried an answer: the server may have closed it since
}

// rawServer is where a client's raw requests go: its host:port, the path
// prefix of its URL and its Host header; ok is false when it is no plain
// HTTP server on a loopback address (its requests then go through
// net/http, which knows proxies and TLS).
func rawServer(client *larder.Client) (address, prefix, host string, ok bool) {
	u, err := url.Parse(client.URL)
	if err != nil || u.Scheme != "http" || u.User != nil {
		return "", "", "", false
	}
	name := u.Hostname()
	if name != "localhost" {
		ip := net.ParseIP(name)
		if ip == nil || !ip.IsLoopback() {
			return "", "", "", false
		}
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(name, port), u.EscapedPath(), u.Host, true
}

// rawCall makes one request of client: its status and body, or an error
// when no answer came. A connection that the server closed while it idled
// fails before any answer: the request is then made once more on a new one.
func rawCall(ctx context.Context, client *larder.Client, method, path string, body []byte) (int, []byte, error) {
	address, prefix, host, _ := rawServer(client)
	var request bytes.Buffer
	fmt.Fprintf(&request, "%s %s%s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\nUser-Agent: larder-go\r\n", method, prefix, path, host)
	if client.Token != "" {
		fmt.Fprintf(&request, "Authorization: Bearer %s\r\n", client.Token)
	}
	if body != nil {
		fmt.Fprintf(&request, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	request.WriteString("\r\n")
	request.Write(body)
	for attempt := 1; ; attempt++ {
		w, err := takeWire(ctx, address)
		if err != nil {
			return 0, nil, err
		}
		reused := w.used
		status, data, keep, err := w.exchange(ctx, request.Bytes(), method)
		if err == nil {
			if keep {
				putWire(address, w)
			} else {
				w.conn.Close()
			}
			return status, data, nil
		}
		w.conn.Close()
		if attempt == 1 && reused && stale(err) {
			continue
		}
		return 0, nil, fmt.Errorf("larder: %s %s: %w", method, path, err)
	}
}

// stale is whether err is what a connection the server had closed gives
// before any answer (not a broken answer: its request may have run).
func stale(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func takeWire(ctx context.Context, address string) (*wire, error) {
	wires.mu.Lock()
	if idle := wires.idle[address]; len(idle) > 0 {
		w := idle[len(idle)-1]
		wires.idle[address] = idle[:len(idle)-1]
		wires.mu.Unlock()
		return w, nil
	}
	wires.mu.Unlock()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, err
	}
	return &wire{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}, nil
}

func putWire(address string, w *wire) {
	wires.mu.Lock()
	defer wires.mu.Unlock()
	if wires.idle == nil {
		wires.idle = map[string][]*wire{}
	}
	if len(wires.idle[address]) >= maxIdleWires {
		w.conn.Close()
		return
	}
	wires.idle[address] = append(wires.idle[address], w)
}

// exchange writes request and reads its answer, within ctx's deadline;
// keep is whether the connection may carry another request.
func (w *wire) exchange(ctx context.Context, request []byte, method string) (status int, data []byte, keep bool, err error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(testTimeout)
	}
	if err := w.conn.SetDeadline(deadline); err != nil {
		return 0, nil, false, err
	}
	if _, err := w.w.Write(request); err != nil {
		return 0, nil, false, err
	}
	if err := w.w.Flush(); err != nil {
		return 0, nil, false, err
	}
	// Nothing at all (EOF, a reset) is a connection closed before this
	// request reached the server (stale); http.ReadResponse would call it an
	// unexpected EOF, as it does a broken answer.
	if _, err := w.r.Peek(1); err != nil {
		return 0, nil, false, err
	}
	resp, err := http.ReadResponse(w.r, &http.Request{Method: method})
	if err != nil {
		return 0, nil, false, err
	}
	data, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, nil, false, err
	}
	w.used = true
	return resp.StatusCode, data, !resp.Close, nil
}

// answerError is the *larder.Error of a status that is no success and its body.
func answerError(status int, data []byte) error { return hook.AnswerError(status, data) }
