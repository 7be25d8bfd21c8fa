package members

import (
	"bytes"
	_ "embed"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"sendstream/ingest"
)

//go:embed login.html
var loginHTML string

var loginPage = template.Must(template.New("login").Parse(loginHTML))

// page is what login.html shows.
type page struct {
	Error string
	Next  string // where to go after signing in (a local path)
	Email string
	Token string // invitation pages only
}

// Routes are the sign-in pages and the internal session routes:
//
//	GET  /login, POST /login     sign in (form); 303 to next, or /
//	POST /logout                 revoke the session; 303 to /login
//	GET  /invitation, POST /invitation   accept an invitation (form)
//	GET  /api/session            the signed-in member (session only)
//	POST /api/invitations        invite a member and email the link (members.manage)
//	DELETE /api/invitations/{id} revoke a pending invitation (members.manage)
//	DELETE /api/members/{id}     remove a member (members.manage)
//
// The form posts are refused cross-origin (Route.SameOrigin), and the
// /api routes take a session and refuse API keys (ingest.CredSession).
func Routes(s *Store) []ingest.Route {
	return []ingest.Route{
		{Method: "GET", Path: "/login", Credential: ingest.CredNone, Handle: func(c *ingest.Call) ingest.Result {
			return render(200, page{Next: localPath(c.Query("next"))})
		}},
		{Method: "POST", Path: "/login", Credential: ingest.CredNone, SameOrigin: true, RawBody: true, Handle: s.login},
		{Method: "POST", Path: "/logout", Credential: ingest.CredNone, SameOrigin: true, RawBody: true, Handle: s.logout},
		{Method: "GET", Path: "/invitation", Credential: ingest.CredNone, Handle: s.invitationPage},
		{Method: "POST", Path: "/invitation", Credential: ingest.CredNone, SameOrigin: true, RawBody: true, Handle: s.acceptInvitation},
		{Method: "GET", Path: "/api/session", Credential: ingest.CredSession, Handle: session},
		{Method: "POST", Path: "/api/invitations", Credential: ingest.CredSession, Handle: s.invite},
		{Method: "DELETE", Path: "/api/invitations/{id}", Credential: ingest.CredSession, Handle: s.revokeInvitation},
		{Method: "DELETE", Path: "/api/members/{id}", Credential: ingest.CredSession, Handle: s.removeMember},
	}
}

func (s *Store) login(c *ingest.Call) ingest.Result {
	form, _ := url.ParseQuery(string(c.Body))
	pg := page{Next: localPath(form.Get("next")), Email: form.Get("email")}
	if pg.Email == "" || form.Get("password") == "" {
		pg.Error = "Enter your email and password."
		return render(400, pg)
	}
	tok, err := s.SignIn(c.Ctx, SignInRequest{Email: pg.Email, Password: form.Get("password"), IP: c.RemoteIP, UserAgent: c.Header("User-Agent")}, time.Now())
	return s.signedIn(tok, err, pg)
}

// signedIn answers a sign-in: the cookie and a 303 to pg.Next, or the page
// again with the error.
func (s *Store) signedIn(tok string, err error, pg page) ingest.Result {
	switch {
	case err == nil:
		next := pg.Next
		if next == "" {
			next = "/"
		}
		return ingest.Result{Status: 303, Headers: map[string]string{"Location": next, "Set-Cookie": s.cookie(tok, s.cfg.SessionMaxAge)}}
	case errors.Is(err, ErrBadCredentials):
		pg.Error = "Email or password is incorrect."
		return render(401, pg)
	case errors.Is(err, ErrThrottled):
		pg.Error = "Too many failed sign-ins for this account or from this address. Try again in " +
			strconv.Itoa(int(s.cfg.FailureWindow.Round(time.Minute)/time.Minute)) + " minutes."
		return render(429, pg)
	}
	pg.Error = "Signing in is unavailable right now; try again later."
	return render(503, pg)
}

func (s *Store) logout(c *ingest.Call) ingest.Result {
	if tok := ingest.SessionToken(c.Header("Cookie")); tok != "" {
		if err := s.Revoke(c.Ctx, tok, time.Now()); err != nil {
			return ingest.Fail(503, "unavailable", "Signing out failed; try again")
		}
	}
	return ingest.Result{Status: 303, Headers: map[string]string{"Location": "/login", "Set-Cookie": s.cookie("", -1)}}
}

func (s *Store) invitationPage(c *ingest.Call) ingest.Result {
	tok := c.Query("token")
	if tok == "" {
		return render(400, page{Error: "This invitation link is incomplete."})
	}
	open, err := s.OpenInvitation(c.Ctx, tok, time.Now())
	switch {
	case err != nil:
		return render(503, page{Error: "Joining is unavailable right now; try again later."})
	case !open:
		return render(400, page{Error: "This invitation is unknown, was revoked, used or has expired; ask for a new one."})
	}
	return render(200, page{Token: tok})
}

func (s *Store) acceptInvitation(c *ingest.Call) ingest.Result {
	form, _ := url.ParseQuery(string(c.Body))
	pg := page{Token: form.Get("token")}
	now := time.Now()
	_, email, err := s.AcceptInvitation(c.Ctx, pg.Token, form.Get("password"), now)
	if err != nil {
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrBadCredentials) || errors.Is(err, errShortPassword) {
			pg.Error = err.Error()
			return render(400, pg)
		}
		return render(503, page{Error: "Joining is unavailable right now; try again later."})
	}
	tok, err := s.SignIn(c.Ctx, SignInRequest{Email: email, Password: form.Get("password"), IP: c.RemoteIP, UserAgent: c.Header("User-Agent")}, now)
	return s.signedIn(tok, err, page{})
}

// sessionAnswer is GET /api/session.
type sessionAnswer struct {
	Session   sessionRef   `json:"session"`
	Member    memberRef    `json:"member"`
	Workspace workspaceRef `json:"workspace"`
}

type sessionRef struct {
	ID string `json:"id"`
}

type memberRef struct {
	ID          string   `json:"id"`
	Email       string   `json:"email"`
	Role        string   `json:"role"`
	Permissions []string `json:"permissions"` // effective, see Effective
}

type workspaceRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Plan string `json:"plan"`
}

func session(c *ingest.Call) ingest.Result {
	p := c.Principal
	return ingest.OK(200, sessionAnswer{
		Session:   sessionRef{ID: p.KeyID},
		Member:    memberRef{ID: p.MemberID, Email: p.Email, Role: p.Role, Permissions: Effective(FromPrincipal(p))},
		Workspace: workspaceRef{ID: p.Workspace, Name: p.WorkspaceName, Plan: p.Plan},
	})
}

// inviteRequest is the body of POST /api/invitations.
type inviteRequest struct {
	Email       string   `json:"email"`
	Role        string   `json:"role"`
	Permissions []string `json:"permissions"`
}

func (s *Store) invite(c *ingest.Call) ingest.Result {
	m := FromPrincipal(c.Principal)
	if m.Role == RoleSupport {
		return ingest.Fail(403, "forbidden", "Support staff have read-only access")
	}
	var req inviteRequest
	if err := ingest.DecodeJSON(c.Body, &req); err != nil {
		return ingest.Fail(400, "invalid_json", err.Error())
	}
	inv, err := s.Invite(c.Ctx, m, req.Email, req.Role, req.Permissions, time.Now())
	switch {
	case err == nil:
		return inv.Announce(ingest.OK(201, inv))
	case errors.Is(err, ErrForbidden):
		return ingest.Fail(403, "forbidden", err.Error())
	case errors.Is(err, ErrInvalid):
		return ingest.Fail(400, "invalid_request", err.Error())
	}
	return ingest.Fail(503, "unavailable", "Inviting failed; nothing was done, retry later")
}

// cookie is the Set-Cookie value of a session token: HttpOnly,
// SameSite=Lax, Secure when the site is https. A negative maxAge deletes
// the cookie.
func (s *Store) cookie(tok string, maxAge time.Duration) string {
	ck := http.Cookie{Name: ingest.SessionCookie, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure}
	if maxAge < 0 {
		ck.MaxAge = -1
	} else {
		ck.MaxAge = int(maxAge / time.Second)
	}
	return ck.String()
}

// localPath returns next when it is a path on this site ("/…" but not
// "//…" or "/\…", which browsers read as another host), else "": sign-in
// never redirects elsewhere.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return ""
	}
	if u, err := url.Parse(next); err != nil || u.Host != "" || u.Scheme != "" {
		return ""
	}
	return next
}

func render(status int, pg page) ingest.Result {
	var b bytes.Buffer
	if err := loginPage.Execute(&b, pg); err != nil {
		return ingest.Fail(500, "internal_error", "rendering the sign-in page: "+err.Error())
	}
	return ingest.Result{Status: status, Raw: b.Bytes(), ContentType: "text/html; charset=utf-8"}
}
