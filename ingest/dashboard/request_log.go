package dashboard

import (
	"context"
	"strconv"
	"strings"

	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/ingest/members"
	chsink "sendstream/sinks/clickhouse"
)

const requestsPath = "/logs/requests"

// requestsShown is how many rows the page shows, newest first.
const requestsShown = 100

var requestsTmpl = pageTemplate("request_log.html")

// requestLogRoutes are the request-log page (spec 8.3: viewing it needs
// the API-keys permission; support staff read it). Its filter is a GET
// form: htmx swaps the table in place when scripts run, a plain
// submission reloads the page otherwise.
//
//	GET /logs/requests?status=&path=&key=   status 422 or 4xx; path substring; key id
func (d Deps) requestLogRoutes() []ingest.Route {
	return []ingest.Route{pageRoute(requestsPath, d.requestsPage)}
}

// requestsRule: api_keys.manage holders and support staff read the
// request log (spec 8.3); it has no forms.
var requestsRule = rule{back: requestsPath, perm: members.PermAPIKeys,
	denied: "Viewing the request log needs the api_keys.manage permission; ask an owner or admin."}

type requestsData struct {
	frame
	Filter  requestsFilter
	Keys    []keyOption
	Rows    []requestRow
	Shown   int
	Checked bool // the query ran (no filter error, store reachable)
}

type requestsFilter struct {
	Status, Path, Key string
}

// keyOption is a credential the key filter offers.
type keyOption struct {
	ID, Label string
	Selected  bool
}

// requestRow is one request-log row with its credential described.
type requestRow struct {
	chsink.RequestRow
	Credential string
}

// parseStatus reads the status filter: "" (any), an exact status (422) or
// a class (4xx).
func parseStatus(s string) (exact, class int, ok bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch {
	case s == "":
		return 0, 0, true
	case len(s) == 3 && s[1:] == "xx" && s[0] >= '1' && s[0] <= '5':
		return 0, int(s[0] - '0'), true
	}
	n, err := strconv.Atoi(s)
	if err != nil || len(s) != 3 || n < 100 || n > 599 {
		return 0, 0, false
	}
	return n, 0, true
}

func (d Deps) requestsPage(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, requestsRule, false)
	if !ok {
		return res
	}
	f := requestsFilter{Status: strings.TrimSpace(c.Query("status")), Path: strings.TrimSpace(c.Query("path")), Key: c.Query("key")}
	data := requestsData{frame: frameOf(p, "Request log"), Filter: f, Shown: requestsShown}
	labels, keys, err := d.credentialLabels(c.Ctx, p.Workspace, f.Key)
	if err != nil {
		return unavailable()
	}
	data.Keys = keys
	status := 200
	exact, class, ok := parseStatus(f.Status)
	switch {
	case !ok:
		status, data.Error = 400, "The status filter must be a status such as 422 or a class such as 4xx; the log is not filtered until it is."
	case d.ClickHouse == nil:
		status, data.Error = 503, "The request log is unavailable right now (no ClickHouse); try again later."
	default:
		rows, err := chsink.FindRequests(c.Ctx, d.ClickHouse, p.Workspace, chsink.RequestFilter{
			Status: exact, StatusClass: class, Path: f.Path, KeyID: f.Key, Limit: requestsShown})
		if err != nil {
			status, data.Error = 503, "The request log could not be read right now; try again later."
			break
		}
		data.Checked = true
		for _, r := range rows {
			data.Rows = append(data.Rows, requestRow{RequestRow: r, Credential: describeCredential(labels, r)})
		}
	}
	return renderFiltered(c, requestsTmpl, status, data)
}

// credentialLabels names the workspace's API keys and OAuth connections by
// id for the table, and lists them for the key filter (selected marks the
// chosen one).
func (d Deps) credentialLabels(ctx context.Context, workspace, selected string) (map[string]string, []keyOption, error) {
	labels := map[string]string{}
	var opts []keyOption
	keys, err := d.Keys.ListAPIKeys(ctx, workspace)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range keys {
		l := k.Hint
		if k.Name != "" {
			l += " (" + k.Name + ")"
		}
		labels[k.ID] = l
		opts = append(opts, keyOption{ID: k.ID, Label: "API key " + l, Selected: k.ID == selected})
	}
	if d.OAuth != nil {
		conns, err := d.OAuth.Connections(ctx, workspace)
		if err != nil {
			return nil, nil, err
		}
		for _, cn := range conns {
			l := "app " + cn.AppName
			if cn.MemberEmail != "" {
				l += " for " + cn.MemberEmail
			}
			labels[cn.ID] = l
			opts = append(opts, keyOption{ID: cn.ID, Label: "OAuth " + l, Selected: cn.ID == selected})
		}
		apps, err := d.OAuth.Apps(ctx, workspace)
		if err != nil {
			return nil, nil, err
		}
		for _, a := range apps { // rows of revoked connections name their app
			labels[appLabel+a.ID] = a.Name
		}
	}
	return labels, opts, nil
}

// appLabel prefixes an app id among the labels of credentialLabels.
const appLabel = "app:"

// describeCredential is the key hint or app of a row; a credential that
// is gone (deleted key, revoked connection) shows its kind and id.
func describeCredential(labels map[string]string, r chsink.RequestRow) string {
	if l, ok := labels[r.KeyID]; ok {
		return l
	}
	switch r.KeyKind {
	case auth.KindAPIKey:
		return "API key " + r.KeyID + " (deleted)"
	case auth.KindOAuth:
		if name, ok := labels[appLabel+r.AppID]; ok && r.AppID != "" {
			return "app " + name + " (connection " + r.KeyID + ", revoked)"
		}
		return "OAuth connection " + r.KeyID + " (revoked)"
	}
	return strings.TrimSpace(strings.ReplaceAll(r.KeyKind, "_", " ") + " " + r.KeyID)
}
