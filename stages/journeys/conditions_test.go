package journeys

import (
	"encoding/json"
	"testing"
	"time"
)

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		op     string
		actual any
		value  string
		want   bool
	}{
		{"eq", "gold", `"gold"`, true},
		{"eq", "gold", `"silver"`, false},
		{"ne", "gold", `"silver"`, true},
		{"eq", nil, `null`, true},
		{"eq", nil, `"x"`, false},
		{"eq", 3.0, `3`, true},
		{"eq", "3", `3`, true}, // a numeric string compares as a number
		{"gt", 10.0, `9`, true},
		{"gt", 9.0, `10`, false},
		{"gte", 10.0, `10`, true},
		{"lt", "2026-01-01T00:00:00Z", `"2026-01-02T00:00:00+02:00"`, true},
		{"gt", "2026-01-02T01:00:00+02:00", `"2026-01-01T23:30:00Z"`, false}, // by time, not text
		{"lt", "apple", `"banana"`, true},
		{"lt", nil, `5`, false},
		{"gt", true, `1`, false},
		{"eq", true, `true`, true},
		{"contains", "hello world", `"lo w"`, true},
		{"contains", 5.0, `"5"`, false},
		{"exists", "", ``, true},
		{"exists", nil, ``, false},
	} {
		if got := compare(c.op, c.actual, json.RawMessage(c.value)); got != c.want {
			t.Errorf("%v %s %s = %v, want %v", c.actual, c.op, c.value, got, c.want)
		}
	}
}

func TestNextTimeOfDay(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no tz database:", err)
	}
	for _, c := range []struct {
		now  string
		hhmm string
		loc  *time.Location
		want string
	}{
		{"2026-03-01T08:00:00Z", "09:30", time.UTC, "2026-03-01T09:30:00Z"},
		{"2026-03-01T09:30:00Z", "09:30", time.UTC, "2026-03-02T09:30:00Z"}, // exactly now: tomorrow
		{"2026-03-01T23:59:00Z", "00:00", time.UTC, "2026-03-02T00:00:00Z"},
		{"2026-03-01T12:00:00Z", "09:00", ny, "2026-03-01T14:00:00Z"}, // EST, UTC-5
		{"2026-03-07T15:00:00Z", "09:00", ny, "2026-03-08T13:00:00Z"}, // the next day is EDT, UTC-4
		{"2026-03-08T05:00:00Z", "02:30", ny, "2026-03-08T07:30:00Z"}, // 02:30 does not exist that day: normalised
	} {
		now, _ := time.Parse(time.RFC3339, c.now)
		got, err := nextTimeOfDay(now, c.hhmm, c.loc)
		if err != nil || got.Format(time.RFC3339) != c.want {
			t.Errorf("nextTimeOfDay(%s, %s, %s) = %s, %v; want %s", c.now, c.hhmm, c.loc, got.Format(time.RFC3339), err, c.want)
		}
	}
	if _, err := nextTimeOfDay(time.Now(), "25:00", time.UTC); err == nil {
		t.Error("25:00 accepted")
	}
	if z := contactZone(map[string]any{"timeZone": "America/New_York"}, time.UTC); z.String() != "America/New_York" {
		t.Errorf("contact zone %s", z)
	}
	if z := contactZone(map[string]any{"timeZone": "Not/AZone"}, time.UTC); z != time.UTC {
		t.Errorf("bad zone gave %s, want the default", z)
	}
}
