package all_test

import (
	"log/slog"
	"testing"

	"sendstream/deploy/stack"
	"sendstream/pipeline"
	"sendstream/pipeline/pipelinetest"
	_ "sendstream/stages/all"
)

// TestEveryStageBuildsAndCloses builds every stage linked in by this package
// with the real resources of the local stack (Postgres and ClickHouse with
// every migration applied), flushes it empty and closes it.
func TestEveryStageBuildsAndCloses(t *testing.T) {
	r := pipeline.Resources{
		Postgres:   stack.PG(t),
		ClickHouse: stack.CH(t),
		Publisher:  &pipelinetest.Publisher{},
		Logger:     slog.Default(),
		// The keys serve's stageSettings passes; stages needing more add them.
		Settings: map[string]string{
			"site_url": "http://127.0.0.1:8080",
			"secret":   "test-secret-for-every-stage-build-0123456789",
		},
	}
	if _, ok := pipeline.Lookup("requestlog"); !ok {
		t.Fatal("stage requestlog is not linked in by stages/all")
	}
	pipelinetest.CheckStages(t, r)
}
