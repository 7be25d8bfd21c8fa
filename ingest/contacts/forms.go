package contacts

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"net/url"
	"strings"

	"sendstream/ingest"
	"sendstream/schemas"
)

//go:embed pages/*.html
var pagesFS embed.FS

var pages = template.Must(template.ParseFS(pagesFS, "pages/*.html"))

// formPage is the data of pages/form.html.
type formPage struct {
	Title, Action, Email, FirstName, Error string
	DoubleOptIn                            bool
}

// messagePage is the data of pages/message.html.
type messagePage struct {
	Title string
	Lines []string
	Lists []string
}

// wantsJSON reports whether a public page call asked for JSON (a JSON body
// or an Accept header preferring it) rather than HTML.
func wantsJSON(c *ingest.Call) bool {
	ct := strings.ToLower(c.Header("Content-Type"))
	return strings.HasPrefix(ct, "application/json") || strings.Contains(strings.ToLower(c.Header("Accept")), "application/json")
}

func (a *api) html(status int, name string, data any) ingest.Result {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		a.log.Error("contacts: render page", "page", name, "err", err)
		return ingest.Result{Status: 500, Raw: []byte("Internal error"), ContentType: "text/plain; charset=utf-8"}
	}
	return ingest.Result{Status: status, Raw: b.Bytes(), ContentType: "text/html; charset=utf-8",
		Headers: map[string]string{"Cache-Control": "no-store", "X-Frame-Options": "DENY"}}
}

// page answers a public call as JSON (body) or as the message page.
func (a *api) message(c *ingest.Call, status int, body any, p messagePage) ingest.Result {
	if wantsJSON(c) {
		return ingest.OK(status, body)
	}
	return a.html(status, "message.html", p)
}

func (a *api) formAction(listID string) string { return "/forms/" + url.PathEscape(listID) }

// formShow is GET /forms/{listId}: the hosted sign-up form of a list.
func (a *api) formShow(c *ingest.Call) ingest.Result {
	l, err := a.store.List(c.Ctx, "", c.Params["listId"])
	if errors.Is(err, ErrListNotFound) {
		return a.html(404, "message.html", messagePage{Title: "Form not found", Lines: []string{"This sign-up form does not exist."}})
	}
	if err != nil {
		return a.internal(err)
	}
	return a.html(200, "form.html", formPage{Title: l.Name, Action: a.formAction(l.ID), DoubleOptIn: l.DoubleOptIn})
}

// formResponse is the JSON answer of POST /forms/{listId}.
type formResponse struct {
	Success bool   `json:"success"`
	ListID  string `json:"listId"`
	// Status is the membership status after the sign-up: PENDING until the
	// emailed link is followed (double opt-in lists), else ACTIVE.
	Status string `json:"status"`
	// ConfirmationSent: a confirmation email is on its way.
	ConfirmationSent bool `json:"confirmationSent"`
}

// formSubmit is POST /forms/{listId}: a sign-up through the hosted form, as
// an HTML form post or JSON ({email, firstName}).
func (a *api) formSubmit(c *ingest.Call) ingest.Result {
	if res, ok := ingest.CheckBodyText(c); !ok {
		return res // NUL, invalid UTF-8 or a malformed escape in a field
	}
	l, err := a.store.List(c.Ctx, "", c.Params["listId"])
	if errors.Is(err, ErrListNotFound) {
		return a.message(c, 404, ingest.ErrorBody{Error: "No such sign-up form", Code: "list_not_found"},
			messagePage{Title: "Form not found", Lines: []string{"This sign-up form does not exist."}})
	}
	if err != nil {
		return a.internal(err)
	}
	var rawEmail, firstName, honeypot string
	jsonBody := strings.HasPrefix(strings.ToLower(c.Header("Content-Type")), "application/json")
	if jsonBody {
		var m map[string]json.RawMessage
		if json.Unmarshal(c.Body, &m) != nil {
			return ingest.Fail(400, codeValidation, "Request body must be a JSON object")
		}
		var errs fieldErrs
		if fn := optString(m, "firstName", &errs); fn != nil {
			firstName = *fn
		}
		if s := optString(m, "email", &errs); s != nil {
			rawEmail = *s
		}
		if len(errs.fields) > 0 {
			return errs.result()
		}
	} else {
		v, err := url.ParseQuery(string(c.Body))
		if err != nil {
			return a.html(400, "form.html", formPage{Title: l.Name, Action: a.formAction(l.ID), DoubleOptIn: l.DoubleOptIn,
				Error: "The form could not be read; please try again."})
		}
		rawEmail, firstName, honeypot = v.Get("email"), strings.TrimSpace(v.Get("firstName")), v.Get("website")
	}
	e, err := NormalizeEmail(rawEmail)
	if err == nil {
		if field, msg, ok := CheckSize(Values{FirstName: &firstName}); !ok { // cannot fail within the form's body cap
			err = errors.New(field + " " + msg)
		}
	}
	if err != nil {
		if jsonBody {
			field := "email"
			if rawEmail != "" && e != "" {
				field = "firstName"
			}
			return ingest.Fail(400, codeValidation, "Invalid input: "+field+" "+err.Error(), field)
		}
		return a.html(400, "form.html", formPage{Title: l.Name, Action: a.formAction(l.ID), DoubleOptIn: l.DoubleOptIn,
			Email: rawEmail, FirstName: firstName, Error: "Please enter a valid email address."})
	}
	done := func(status string, sent bool) ingest.Result {
		p := messagePage{Title: "You're subscribed", Lines: []string{"Thank you! You are now subscribed to " + l.Name + "."}}
		if status == StatusPending {
			p = messagePage{Title: "Check your inbox", Lines: []string{
				"We sent a confirmation link to " + e + ".",
				"Follow it to confirm your subscription to " + l.Name + ".",
			}}
		}
		return a.message(c, 200, formResponse{Success: true, ListID: l.ID, Status: status, ConfirmationSent: sent}, p)
	}
	if honeypot != "" {
		// A bot filled the hidden field: answer like a success, store nothing.
		return done(map[bool]string{true: StatusPending, false: StatusActive}[l.DoubleOptIn], l.DoubleOptIn)
	}
	t := Target{Email: e}
	if firstName != "" {
		t.Fields.FirstName = &firstName
	}
	r, err := a.store.Signup(c.Ctx, l, t, func(r MembershipResult) []ingest.Message {
		ev := newEvents(l.Workspace, c.RequestID)
		if r.ContactCreated {
			ev.created(r.Contact)
		}
		switch {
		case r.Status == StatusPending:
			token, exp := a.signer.Sign(l.Workspace, r.Contact.ID)
			first := ""
			if r.Contact.FirstName != nil {
				first = *r.Contact.FirstName
			}
			ev.optIn(schemas.OptInRequestedPayload{
				ContactID: r.Contact.ID, Email: r.Contact.Email, FirstName: first, ListID: l.ID, ListName: l.Name,
				ConfirmURL: a.site + "/confirm?token=" + url.QueryEscape(token), ExpiresAt: exp.UTC(),
			})
		case r.Changed:
			ev.membership(schemas.TypeContactAddedToList, r.Contact, l, r.Status, "form", c.RequestID, ev.now, true)
		}
		return ev.out
	})
	if errors.Is(err, ErrContactLimit) {
		return a.message(c, 403, ingest.ErrorBody{Error: "This list cannot take new sign-ups right now", Code: "contact_limit_reached"},
			messagePage{Title: "Sign-ups are closed", Lines: []string{"This list cannot take new sign-ups right now."}})
	}
	if err != nil {
		return a.internal(err)
	}
	res := done(r.Status, r.Status == StatusPending)
	res.Stored = r.ContactCreated || r.Changed
	a.announced(&res, r.Announced)
	return res
}

// confirmResponse is the JSON answer of GET /confirm.
type confirmResponse struct {
	// Confirmed: this click activated something. False on a repeated click.
	Confirmed bool `json:"confirmed"`
	// AlreadyConfirmed: nothing was pending (a repeated click).
	AlreadyConfirmed bool `json:"alreadyConfirmed"`
	// ContactConfirmed: the contact itself went from PENDING to ACTIVE.
	ContactConfirmed bool            `json:"contactConfirmed"`
	Lists            []ConfirmedList `json:"lists"`
}

// confirm is GET /confirm?token=: the double opt-in click (spec 3.2).
func (a *api) confirm(c *ingest.Call) ingest.Result {
	ws, id, err := a.signer.Verify(c.Query("token"))
	switch {
	case errors.Is(err, ErrTokenExpired):
		return a.message(c, 410, ingest.ErrorBody{Error: "This confirmation link has expired", Code: "token_expired"},
			messagePage{Title: "Link expired", Lines: []string{"This confirmation link has expired. Please sign up again to get a new one."}})
	case err != nil:
		return a.message(c, 400, ingest.ErrorBody{Error: "This confirmation link is not valid", Code: "invalid_token", Fields: []string{"token"}},
			messagePage{Title: "Invalid link", Lines: []string{"This confirmation link is not valid. Please use the link from your email."}})
	}
	r, err := a.store.Confirm(c.Ctx, ws, id, func(r ConfirmResult) []ingest.Message {
		ev := newEvents(ws, c.RequestID)
		contact := Contact{ID: id, Email: r.Email}
		for _, l := range r.Lists {
			ev.membership(schemas.TypeListSubscriptionConfirmed, contact, ListRef{ID: l.ID, Workspace: ws, Name: l.Name},
				StatusActive, "confirmation", l.ConfirmedAt.Format("2006-01-02T15:04:05.999999999Z07:00"), l.ConfirmedAt, true)
		}
		if r.ContactConfirmed {
			at := ev.now
			if len(r.Lists) > 0 {
				at = r.Lists[0].ConfirmedAt
			}
			ev.confirmed(id, r.Email, at)
		}
		return ev.out
	})
	if errors.Is(err, ErrContactNotFound) {
		return a.message(c, 404, ingest.ErrorBody{Error: "This subscription no longer exists", Code: "contact_not_found"},
			messagePage{Title: "Subscription not found", Lines: []string{"This subscription no longer exists."}})
	}
	if err != nil {
		return a.internal(err)
	}
	names := make([]string, 0, len(r.Lists))
	for _, l := range r.Lists {
		names = append(names, l.Name)
	}
	changed := len(r.Lists) > 0 || r.ContactConfirmed
	body := confirmResponse{Confirmed: changed, AlreadyConfirmed: !changed, ContactConfirmed: r.ContactConfirmed, Lists: r.Lists}
	if body.Lists == nil {
		body.Lists = []ConfirmedList{}
	}
	p := messagePage{Title: "Subscription confirmed", Lines: []string{"Thank you! Your subscription is confirmed."}, Lists: names}
	if !changed {
		p = messagePage{Title: "Already confirmed", Lines: []string{"Your subscription was already confirmed. Nothing has changed."}}
	}
	res := a.message(c, 200, body, p)
	res.Stored = changed
	a.announced(&res, r.Announced)
	return res
}
