package lardertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/larder-dev/larder/clients/go/larder"
)

// terseServer answers each request and then closes the connection without
// saying so, as a server does whose idle limit struck between two requests;
// its answers' bodies are chunked. requests are the request lines it read.
type terseServer struct {
	ln       net.Listener
	mu       sync.Mutex
	requests []string
}

func startTerseServer(t *testing.T) *terseServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &terseServer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.answer(conn)
		}
	}()
	return s
}

func (s *terseServer) answer(conn net.Conn) {
	defer conn.Close()
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req.Method+" "+req.URL.Path)
	s.mu.Unlock()
	status, body := 204, ""
	switch {
	case req.Method == http.MethodPost:
		status, body = 201, `{"id": "st_made", "path": "/nowhere/store.sqlite", "label": "L", "counts": {"artists": 4}}`
	case strings.HasSuffix(req.URL.Path, "/gone"):
		status, body = 404, `{"error": {"code": "store_not_found", "message": "no store", "details": {}}}`
	case strings.HasSuffix(req.URL.Path, "/broken"):
		status, body = 500, `{"error": {"code": "internal", "message": "it broke", "details": {}}}`
	}
	if body == "" {
		fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\n\r\n", status, http.StatusText(status))
		return
	}
	fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n",
		status, http.StatusText(status), 10, body[:10], len(body)-10, body[10:])
}

// TestRawCallsOnConnectionsTheServerClosed: each request reaches the
// server once, on a new connection when the kept one was closed; chunked
// answers are read; an error answer is a *larder.Error as net/http's path
// gives it.
func TestRawCallsOnConnectionsTheServerClosed(t *testing.T) {
	server := startTerseServer(t)
	client := larder.New("http://"+server.ln.Addr().String(), "")
	if _, _, _, ok := rawServer(client); !ok {
		t.Fatalf("%s is not a raw server", client.URL)
	}
	ctx := context.Background()
	store, err := createStore(ctx, client, larder.StoreOptions{Template: "gallery"})
	if err != nil || store.ID != "st_made" || store.Info.Counts["artists"] != 4 || store.Client() != client {
		t.Fatalf("createStore: %+v, %v", store, err)
	}
	names := []string{"a", "gone", "b", "broken", "c", "d"}
	for _, name := range names {
		status, data, err := rawCall(ctx, client, http.MethodDelete, "/stores/"+name, nil)
		if err != nil {
			t.Fatalf("DELETE %s: %v", name, err)
		}
		err = nil
		if status/100 != 2 {
			err = answerError(status, data)
		}
		var e *larder.Error
		switch name {
		case "gone":
			if !larder.IsNotFound(err) {
				t.Errorf("DELETE gone: %v, want a 404", err)
			}
		case "broken":
			if !errors.As(err, &e) || e.Status != 500 || e.Code != "internal" || err.Error() != "larder: 500 internal: it broke" {
				t.Errorf("DELETE broken: %v, want larder: 500 internal: it broke", err)
			}
		default:
			if status != 204 || err != nil {
				t.Errorf("DELETE %s: %d %v, want 204", name, status, err)
			}
		}
	}
	server.mu.Lock()
	got := append([]string(nil), server.requests...)
	server.mu.Unlock()
	want := []string{"POST /stores"}
	for _, name := range names {
		want = append(want, "DELETE /stores/"+name)
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the server read %v, want each request once: %v", got, want)
	}
}

// TestRawServer: raw requests only to plain HTTP on a loopback address.
func TestRawServer(t *testing.T) {
	for url, want := range map[string]bool{
		"http://127.0.0.1:7464": true, "http://localhost:80/prefix": true, "http://[::1]:9": true,
		"https://127.0.0.1:7464": false, "http://10.0.0.1:7464": false, "http://larder.example:7464": false,
		"http://user:pw@127.0.0.1:1": false,
	} {
		if _, _, _, ok := rawServer(&larder.Client{URL: url}); ok != want {
			t.Errorf("rawServer(%s): %v, want %v", url, ok, want)
		}
	}
	address, prefix, host, _ := rawServer(&larder.Client{URL: "http://localhost:8080/larder"})
	if address != "localhost:8080" || prefix != "/larder" || host != "localhost:8080" {
		t.Errorf("rawServer: %q %q %q", address, prefix, host)
	}
}
