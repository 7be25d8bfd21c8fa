package render

import (
	"testing"
	"time"
)

// TestSharedCompilesOnce: two users of one budget (the send path and the
// delivery stage) get one Engine, so the second compile of a source in
// the process reuses the parsed templates of the first.
func TestSharedCompilesOnce(t *testing.T) {
	b := Budget{MaxIterations: 777, Timeout: 3 * time.Second}
	ingest, delivery := Shared(b), Shared(Budget{MaxIterations: 777, Timeout: 3 * time.Second})
	if ingest != delivery {
		t.Fatal("one budget, two engines")
	}
	if Shared(DefaultBudget()) != Shared(Budget{}) {
		t.Error("the default budget spelled two ways gave two engines")
	}
	if Shared(Budget{MaxIterations: 778}) == ingest {
		t.Error("another budget shares the engine")
	}
	src := Source{Subject: "Hi {{ name }}", HTML: "<p>shared {{ name }}</p>", Text: "shared {{ name }}"}
	first, err := ingest.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	n := delivery.Cached()
	second, err := delivery.Compile(Source{Subject: "Hi {{ name }}", HTML: "<p>shared {{ name }}</p>", Text: "shared {{ name }}"})
	if err != nil {
		t.Fatal(err)
	}
	if delivery.Cached() != n {
		t.Errorf("the second compile parsed again: %d cached templates, was %d", delivery.Cached(), n)
	}
	if first.HTML != second.HTML || first.Subject != second.Subject || first.Text != second.Text {
		t.Error("the second compile did not reuse the first one's templates")
	}
}
