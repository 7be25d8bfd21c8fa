package main

import (
	"sendstream/bench/harness"
	"sendstream/bench/load"
)

// me: issue 2's system under test. An authenticated GET through auth, rate
// limits and the request log (published with acks=all before the answer),
// against the bare fasthttp JSON handler. Target ≥ 0.60×.
func init() {
	harness.Register(harness.Benchmark{
		Name:      "me",
		Doc:       "GET /api/v1/me with an API key (auth, limits, request log) vs the bare fasthttp JSON handler",
		Issue:     2,
		Requires:  []string{"main.go"},
		Baselines: []string{"http-json"},
		Request: func(s *harness.System) *load.Request {
			return &load.Request{Method: "GET", URL: s.BaseURL + "/api/v1/me",
				Header: [][2]string{{"Authorization", "Bearer " + s.APIKey}}}
		},
		OpenLoop: []harness.OpenLoop{{Rate: 5000}},
		Targets:  harness.Targets{MinRatio: 0.60},
	})
}
