package main

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"
)

// serveDebug serves Go's pprof handlers on addr (SENDSTREAM_DEBUG_ADDR),
// apart from the public listener, for profiling a running process.
func serveDebug(addr string, log *slog.Logger) {
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
