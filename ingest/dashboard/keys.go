package dashboard

import (
	"errors"
	"net/url"
	"strings"
	"time"

	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/ingest/members"
)

const keysPath = "/settings/api-keys"

// keysData is what api_keys.html shows.
type keysData struct {
	frame
	Keys      []auth.APIKey
	CanManage bool // the forms: api_keys.manage
	ReadOnly  bool // support staff: the list only
	Scopes    []checkBox
	Form      keyForm
	Created   *createdKey // the new key, shown once in the POST's answer
}

type keyForm struct {
	Name, Expires string
	Scopes        []string
}

type createdKey struct {
	Name, Key string
}

// keysRule: api_keys.manage manages the keys; support staff read them;
// other members are refused.
var keysRule = rule{back: keysPath, perm: members.PermAPIKeys,
	ready:   func(d Deps) bool { return d.Keys != nil },
	support: "Support staff have read-only access: keys cannot be created or deleted.",
	denied:  "Managing API keys needs the api_keys.manage permission; ask an owner or admin."}

// page lists the keys around data's form state; status is the answer's.
func (d Deps) page(c *ingest.Call, p ingest.Principal, status int, data keysData) ingest.Result {
	manage := keysRule.manages(p)
	keys, err := d.Keys.ListAPIKeys(c.Ctx, p.Workspace)
	if err != nil {
		return unavailable()
	}
	data.frame = data.frame.titled(p, "API keys")
	data.Keys, data.CanManage, data.ReadOnly = keys, manage, !manage
	data.Scopes = boxes(auth.Scopes, data.Form.Scopes)
	return render(keysTmpl, status, data)
}

func (d Deps) keysPage(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, keysRule, false)
	if !ok {
		return res
	}
	return d.page(c, p, 200, keysData{})
}

func (d Deps) createKey(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, keysRule, true)
	if !ok {
		return res
	}
	form, err := url.ParseQuery(string(c.Body))
	if err != nil {
		return d.page(c, p, 400, keysData{frame: frame{Error: formUnreadable}})
	}
	f := keyForm{Name: strings.TrimSpace(form.Get("name")), Expires: form.Get("expires"), Scopes: form["scope"]}
	bad := func(msg string) ingest.Result {
		return d.page(c, p, 400, keysData{frame: frame{Error: msg}, Form: f})
	}
	for _, s := range f.Scopes {
		if !auth.ValidScope(s) {
			return bad("Unknown scope " + s + ".")
		}
	}
	now := time.Now()
	var expires *time.Time
	if f.Expires != "" {
		day, err := time.Parse(time.DateOnly, f.Expires)
		if err != nil {
			return bad("The expiry must be a date (YYYY-MM-DD).")
		}
		end := day.Add(24 * time.Hour) // valid through that day, UTC
		if !end.After(now) {
			return bad("The expiry date has passed; choose a later one.")
		}
		expires = &end
	}
	_, key, err := d.Keys.CreateAPIKey(c.Ctx, p.Workspace, f.Name, f.Scopes, expires)
	if err != nil {
		return unavailable()
	}
	return d.page(c, p, 200, keysData{Created: &createdKey{Name: f.Name, Key: key}})
}

func (d Deps) deleteKey(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, keysRule, true)
	if !ok {
		return res
	}
	err := d.Keys.DeleteAPIKey(c.Ctx, p.Workspace, c.Params["id"])
	switch {
	case err == nil:
		return redirect(keysPath)
	case errors.Is(err, auth.ErrNotFound):
		return d.page(c, p, 404, keysData{frame: frame{Error: "No such key in this workspace (already deleted?)."}})
	}
	return unavailable()
}
