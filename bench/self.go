package main

import "sendstream/bench/harness"

// self checks the harness itself: the bare JSON baseline against a second
// copy of itself. The ratio should come out near 1.0; how far it strays is
// the noise floor of a comparison on this machine.
func init() {
	harness.Register(harness.Benchmark{
		Name:      "self",
		Doc:       "harness self-check: bare fasthttp JSON baseline vs a second copy of itself (ratio ≈ 1)",
		Manual:    true,
		SelfTest:  true,
		Baselines: []string{"http-json"},
		OpenLoop:  []harness.OpenLoop{{Rate: 5000, NoBaseline: true}},
	})
}
