// Command faultproxy runs the Kinesis fault proxy (faultproxy.Front) by hand,
// in front of an emulator:
//
//	go run ./internal/cmd/faultproxy -target http://127.0.0.1:4567 -listen 127.0.0.1:4568 \
//	    -throttle 0.1 -errors 0.01 -resets 0.01 -limits
//
// Point connect-kinesis' `endpoint` at the listen address. The faults can be
// changed while it runs through the control address (-control):
//
//	curl -X PUT  127.0.0.1:4569/rules/GetRecords -d '{"ThrottleRate":0.5}'
//	curl -X PUT  127.0.0.1:4569/reads  -d '{"ExpiredIteratorRate":0.05,"HangRate":0.01}'
//	curl -X PUT  127.0.0.1:4569/limits -d '{"Reads":true,"Writes":true}'
//	curl -X DELETE 127.0.0.1:4569/rules    # everything off
//	curl 127.0.0.1:4569/stats
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
)

func main() {
	var (
		target   = flag.String("target", "", "the emulator's endpoint URL, e.g. http://127.0.0.1:4567 (required)")
		listen   = flag.String("listen", "127.0.0.1:0", "address the proxy serves Kinesis on")
		control  = flag.String("control", "", "address of the control API (PUT /rules/{op}, /reads, /limits; DELETE /rules; GET /stats); empty disables it")
		seed     = flag.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the random faults")
		throttle = flag.Float64("throttle", 0, "fraction of every call answered ProvisionedThroughputExceededException")
		errs     = flag.Float64("errors", 0, "fraction of every call answered 500 InternalFailure")
		resets   = flag.Float64("resets", 0, "fraction of every call whose connection is closed without an answer, and of GetRecords answers cut mid-body")
		latency  = flag.Duration("latency", 0, "latency added to every call")
		entries  = flag.Float64("entry-failures", 0, "fraction of PutRecords entries refused")
		expired  = flag.Float64("expired", 0, "fraction of GetRecords answered ExpiredIteratorException")
		hang     = flag.Float64("hang", 0, "fraction of GetRecords that hang until the client gives up")
		limits   = flag.Bool("limits", false, "enforce the per-shard limits: 5 GetRecords/s and 2 MiB/s read, 1,000 records/s and 1 MiB/s write")
	)
	flag.Parse()
	if *target == "" {
		fmt.Fprintln(os.Stderr, "faultproxy: -target is required, e.g. -target http://127.0.0.1:4567")
		os.Exit(2)
	}
	f, err := faultproxy.StartFront(*target, *listen, *seed)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultproxy:", err)
		os.Exit(1)
	}
	defer f.Close()
	rule := faultproxy.Rule{ThrottleRate: *throttle, ErrorRate: *errs, CutRate: *resets, Latency: *latency}
	f.Set(faultproxy.AllOperations, rule)
	put := rule
	put.EntryFailRate = *entries
	f.Set("PutRecords", put)
	f.SetReadFaults(faultproxy.ReadFaults{ExpiredIteratorRate: *expired, HangRate: *hang, ResetRate: *resets})
	f.SetLimits(faultproxy.Limits{Reads: *limits, Writes: *limits})
	fmt.Printf("faultproxy: serving %s -> %s (seed %d)\n", f.URL, *target, *seed)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *control != "" {
		srv := &http.Server{Addr: *control, Handler: controlHandler(f), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintln(os.Stderr, "faultproxy: control API:", err)
				stop()
			}
		}()
		defer srv.Close()
		fmt.Printf("faultproxy: control API on http://%s\n", *control)
	}
	<-ctx.Done()
}

// controlHandler changes the front's faults at run time.
func controlHandler(f *faultproxy.Front) http.Handler {
	mux := http.NewServeMux()
	decode := func(w http.ResponseWriter, r *http.Request, v any) bool {
		if err := json.NewDecoder(r.Body).Decode(v); err != nil {
			http.Error(w, "decoding the body: "+err.Error(), http.StatusBadRequest)
			return false
		}
		return true
	}
	mux.HandleFunc("PUT /rules/{op}", func(w http.ResponseWriter, r *http.Request) {
		var rule faultproxy.Rule
		if decode(w, r, &rule) {
			op := r.PathValue("op")
			if strings.EqualFold(op, "all") {
				op = faultproxy.AllOperations
			}
			f.Set(op, rule)
		}
	})
	mux.HandleFunc("DELETE /rules", func(http.ResponseWriter, *http.Request) { f.ClearAll() })
	mux.HandleFunc("PUT /reads", func(w http.ResponseWriter, r *http.Request) {
		var rf faultproxy.ReadFaults
		if decode(w, r, &rf) {
			f.SetReadFaults(rf)
		}
	})
	mux.HandleFunc("PUT /limits", func(w http.ResponseWriter, r *http.Request) {
		var l faultproxy.Limits
		if decode(w, r, &l) {
			f.SetLimits(l)
		}
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		out := map[string]any{"front": f.FrontStats()}
		for _, op := range []string{"PutRecords", "PutRecord", "GetRecords", "GetShardIterator", "ListShards", "DescribeStreamSummary"} {
			out[op] = f.Stats(op)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	return mux
}
