package pipelinetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sendstream/pipeline"
	"sendstream/schemas"
)

type okStage struct{ closed, flushed bool }

func (s *okStage) Handle(context.Context, schemas.Envelope) ([]schemas.Envelope, error) {
	return nil, nil
}
func (s *okStage) Flush(context.Context) error { s.flushed = true; return nil }
func (s *okStage) Close() error                { s.closed = true; return nil }

var (
	built    []*okStage
	register sync.Once
)

func TestCheckStagesBuildsFlushesCloses(t *testing.T) {
	built = nil
	register.Do(func() {
		pipeline.Register(pipeline.Spec[int]{
			Name: "pt-ok", Consumes: schemas.TopicEvents, Produces: []string{schemas.TopicWebhooks}, Defaults: 3,
			New: func(_ context.Context, r pipeline.Resources, cfg int) (pipeline.Stage, error) {
				if cfg != 3 || r.Publisher == nil {
					return nil, fmt.Errorf("New got cfg %d, publisher %v", cfg, r.Publisher)
				}
				s := &okStage{}
				built = append(built, s)
				return s, nil
			},
		})
	})
	CheckStages(t, pipeline.Resources{Publisher: &Publisher{}})
	if len(built) != 1 || !built[0].flushed || !built[0].closed {
		t.Fatalf("built %+v", built)
	}
}

func TestClusterHasPipelineTopics(t *testing.T) {
	brokers := Cluster(t, "x.")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: brokers, TopicPrefix: "x.", Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, topic := range schemas.AllTopics {
		if err := p.Publish(ctx, topic, schemas.Envelope{ID: "1", Key: "k", Type: "t.v1"}); err != nil {
			t.Fatalf("%s: %v", topic, err)
		}
	}
}
