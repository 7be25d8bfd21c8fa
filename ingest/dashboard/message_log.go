package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"slices"
	"strings"
	"time"

	"sendstream/ingest"
	"sendstream/ingest/transactional"
	"sendstream/schemas"
	chsink "sendstream/sinks/clickhouse"
)

const messagesPath = "/logs/messages"

// messagesShown is how many messages the page lists, newest first.
const messagesShown = 100

// chartDays is how many days the chart covers, today included.
const chartDays = 14

var messagesTmpl = pageTemplate("message_log.html")

// messageLogRoutes are the message-log page: the workspace's transactional
// and journey messages as GET /v1/transactional lists them
// (transactional.Store.List), filtered by status and recipient, and a
// uPlot chart of the messages reaching each status per day over the last
// 14 days (the message log's status changes in ClickHouse). Any member
// and support staff may read it.
//
//	GET /logs/messages?status=&to=
func (d Deps) messageLogRoutes() []ingest.Route {
	return []ingest.Route{pageRoute(messagesPath, d.messagesPage)}
}

// messagesRule: every member and support staff read the message log; it
// has no forms.
var messagesRule = rule{back: messagesPath, anyoneReads: true,
	ready: func(d Deps) bool { return d.Messages != nil }}

type messagesData struct {
	frame
	Filter   messagesFilter
	Statuses []keyOption
	Messages []messageRow
	Shown    int
	Checked  bool
	Chart    template.JS // the chart's data (JSON in a data block), "" without
}

type messagesFilter struct{ Status, To string }

// messageRow is a message with its subject: as rendered once delivery
// handed it off (Rendered); before that, a template send's subject as
// the template has it (inline content is not stored).
type messageRow struct {
	transactional.Message
	Subject  string
	Rendered bool
	At       time.Time // the last status change
}

// chartData is what static/messages-chart.js draws: days (Unix seconds,
// midnight UTC) and one series per status.
type chartData struct {
	Days   []int64            `json:"days"`
	Series map[string][]int64 `json:"series"`
}

func (d Deps) messagesPage(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, messagesRule, false)
	if !ok {
		return res
	}
	f := messagesFilter{Status: c.Query("status"), To: strings.TrimSpace(c.Query("to"))}
	data := messagesData{frame: frameOf(p, "Message log"), Filter: f, Shown: messagesShown}
	for _, s := range schemas.MessageStatuses {
		data.Statuses = append(data.Statuses, keyOption{ID: s, Label: s, Selected: s == f.Status})
	}
	q := transactional.ListQuery{Status: f.Status, Limit: messagesShown}
	var problems []string
	if f.Status != "" && !slices.Contains(schemas.MessageStatuses, f.Status) {
		problems = append(problems, "The status must be one of "+strings.Join(schemas.MessageStatuses, ", ")+".")
	}
	if f.To != "" {
		to, err := schemas.NormalizeEmail(f.To)
		if err != nil {
			problems = append(problems, "The recipient must be an email address ("+err.Error()+").")
		}
		q.To = to
	}
	status := 200
	if len(problems) > 0 {
		status, data.Error = 400, strings.Join(problems, " ")+" The log is not filtered until it is."
	} else {
		msgs, err := d.Messages.List(c.Ctx, p.Workspace, q)
		if err != nil {
			return unavailable()
		}
		data.Checked = true
		subjects := map[string]string{}
		for _, m := range msgs {
			row := messageRow{Message: m, Rendered: m.Subject != nil, At: lastChange(m)}
			if row.Rendered {
				row.Subject = *m.Subject
			} else {
				row.Subject = d.subject(c.Ctx, p.Workspace, m.TemplateID, subjects)
			}
			data.Messages = append(data.Messages, row)
		}
	}
	if d.ClickHouse != nil {
		if chart, err := d.messagesChart(c.Ctx, p.Workspace, time.Now()); err == nil {
			data.Chart = chart
		}
	}
	return renderFiltered(c, messagesTmpl, status, data)
}

// subject is the template's subject line (cached per page in seen); ""
// for inline content or a template deleted since.
func (d Deps) subject(ctx context.Context, ws, templateID string, seen map[string]string) string {
	if templateID == "" {
		return ""
	}
	if s, ok := seen[templateID]; ok {
		return s
	}
	t, err := d.Messages.Template(ctx, ws, templateID)
	if err != nil && !errors.Is(err, transactional.ErrTemplateNotFound) {
		return ""
	}
	seen[templateID] = t.Subject
	return t.Subject
}

// lastChange is the time of the message's latest status.
func lastChange(m transactional.Message) time.Time {
	at := m.CreatedAt
	for _, t := range []*time.Time{m.SentAt, m.DeliveredAt, m.BouncedAt, m.ComplainedAt, m.FailedAt} {
		if t != nil && t.After(at) {
			at = *t
		}
	}
	return at
}

// messagesChart is the chart's JSON: chartDays days up to now's, a series
// per status with a count (0 when none) for every day.
func (d Deps) messagesChart(ctx context.Context, ws string, now time.Time) (template.JS, error) {
	today := now.UTC().Truncate(24 * time.Hour)
	first := today.AddDate(0, 0, 1-chartDays)
	counts, err := chsink.MessagesPerDay(ctx, d.ClickHouse, ws, first)
	if err != nil {
		return "", err
	}
	cd := chartData{Series: map[string][]int64{}}
	for i := range chartDays {
		cd.Days = append(cd.Days, first.AddDate(0, 0, i).Unix())
	}
	for _, s := range schemas.MessageStatuses {
		cd.Series[s] = make([]int64, chartDays)
	}
	for _, c := range counts {
		i := int(c.Day.Sub(first) / (24 * time.Hour))
		if s, ok := cd.Series[c.Status]; ok && i >= 0 && i < chartDays {
			s[i] = int64(c.Messages)
		}
	}
	b, err := json.Marshal(cd)
	if err != nil {
		return "", err
	}
	return template.JS(b), nil
}
