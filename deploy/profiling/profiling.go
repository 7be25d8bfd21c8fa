// Package profiling serves Go's pprof handlers on a listener of their own,
// apart from the public one, for profiling a running sendstream process
// (SENDSTREAM_DEBUG_ADDR for serve, ingest and worker;
// SENDSTREAM_BROKER_DEBUG_ADDR for the local broker).
package profiling

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"
)

// Serve serves the pprof handlers under /debug/pprof/ on addr until the
// process ends; it returns only when the listener fails, after logging why.
// Callers run it in a goroutine of its own.
func Serve(addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Info("debug listener", "addr", addr)
	if err := srv.ListenAndServe(); err != nil {
		log.Error("debug listener stopped", "addr", addr, "err", err)
	}
}
