package baseline

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/osteele/liquid"
)

// FROZEN: the Liquid baseline: a 2 KB transactional template parsed once,
// rendered with fresh bindings, one worker per core.

//go:embed template.liquid
var liquidTemplate string

func init() {
	register(&Baseline{
		Name: "liquid-render",
		Doc:  "osteele/liquid render of a 2 KB template parsed once, one worker per core",
		Unit: "renders",
		Setup: func(ctx context.Context, env Env) (func(context.Context, int) (Op, error), func(), error) {
			tpl, err := liquid.NewEngine().ParseString(liquidTemplate)
			if err != nil {
				return nil, nil, fmt.Errorf("parse template: %w", err)
			}
			return func(context.Context, int) (Op, error) {
				return func(context.Context) (int, error) {
					out, err := tpl.Render(liquidBindings())
					if err != nil {
						return 0, fmt.Errorf("render: %w", err)
					}
					if len(out) < 1500 {
						return 0, fmt.Errorf("render: %d bytes", len(out))
					}
					return 1, nil
				}, nil
			}, func() {}, nil
		},
	})
}

// liquidBindings builds the variables of one render, as a send request would.
func liquidBindings() liquid.Bindings {
	items := make([]map[string]any, 4)
	for i := range items {
		items[i] = map[string]any{"name": "Widget <" + string(rune('A'+i)) + ">", "variant": "blue", "quantity": i + 1, "price": 9.5 + float64(i)}
	}
	return liquid.Bindings{
		"contact":     map[string]any{"first_name": "Ada", "email": "ada@example.com", "language": "en"},
		"customField": map[string]any{"plan": "pro"},
		"data": map[string]any{
			"subject": "Your order & receipt",
			"order": map[string]any{"number": "A-10023", "date": "2025-01-02", "currency": "eur",
				"total": 123.456, "items": items},
			"support_url": "https://help.example.com/?a=1&b=2",
			"company":     "Example Co",
			"address":     "1 Main St, Springfield",
		},
	}
}
