package testenv

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers every line it reads with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through addr and reads it back.
func roundTrip(c net.Conn, line string) (string, error) {
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := bufio.NewReader(c).ReadString('\n')
	return got, err
}

// A connection through the proxy reaches the target; Cut closes it and
// refuses new ones; Restore, on the same address, passes them again.
func TestProxyCutAndRestore(t *testing.T) {
	p := NewProxy(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, "one"); err != nil || got != "one\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.Cut()
	if _, err := roundTrip(c, "two"); err == nil {
		t.Error("a connection through the proxy still works after Cut")
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Error("a connection through the proxy hangs after Cut instead of closing")
	}
	if c2, err := net.Dial("tcp", p.Addr); err == nil {
		c2.Close()
		t.Error("the proxy accepts connections after Cut")
	}
	p.Restore()
	c3, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatalf("after Restore: %v", err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, "three"); err != nil || got != "three\n" {
		t.Fatalf("after Restore: %q, %v", got, err)
	}
}

// Stall holds what goes through without closing anything; Heal delivers it.
func TestProxyStallAndHeal(t *testing.T) {
	p := NewProxy(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.Stall()
	if _, err := io.WriteString(c, "held\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if got, err := r.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a stalled proxy: %q, %v; want no answer", got, err)
	}
	p.Heal()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after Heal: %q, %v", got, err)
	}
}
