package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"

	"sendstream/pipeline"
	"sendstream/schemas"
)

// Goals turns recorded events named "purchase" into webhook envelopes. It is
// the whole of a stage: one file under stages/goals/ plus a blank import in
// stages/all.
type Goals struct{}

// Handle is called in order per partition and may see an envelope twice; the
// output's id is derived from the input's by the runner when left empty, so
// a replay publishes the same id.
func (Goals) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	var ev struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(env.Payload, &ev); err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("goals: decode %s: %w", env.ID, err)) // to the dead-letter topic
	}
	if ev.Name != "purchase" {
		return nil, nil
	}
	return []schemas.Envelope{{Type: "goal.reached.v1", Key: env.Key, Payload: env.Payload}}, nil
}

func ExampleRegister() {
	// In stages/goals/goals.go, inside func init():
	pipeline.Register(pipeline.Spec[struct{}]{
		Name:     "goals",                         // consumer group "sendstream.goals"
		Consumes: schemas.TopicEvents,             // read
		Produces: []string{schemas.TopicWebhooks}, // Handle's outputs go here
		New: func(ctx context.Context, r pipeline.Resources, _ struct{}) (pipeline.Stage, error) {
			return Goals{}, nil
		},
	})
}

func ExampleRun() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	brokers := []string{"127.0.0.1:9092"}
	if err := pipeline.EnsureTopics(ctx, brokers, "", schemas.AllTopics, 4); err != nil {
		fmt.Println(err)
		return
	}
	producer, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: brokers})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer producer.Close()                        // after Run returned: Run publishes through it
	stages, err := pipeline.SelectStages("goals") // `sendstream worker --stages goals`
	if err != nil {
		fmt.Println(err)
		return
	}
	err = pipeline.Run(ctx, pipeline.RunConfig{
		Brokers:   brokers,
		Stages:    stages,
		Resources: pipeline.Resources{Publisher: producer},
	})
	fmt.Println(err)
}
