package dashboard

import (
	"errors"

	"sendstream/ingest"
	"sendstream/ingest/members"
)

// rule is a page's access rule: members holding perm manage it (its
// forms); support staff only read it, whatever they hold; other members
// read it when anyoneReads and are refused (403) otherwise.
type rule struct {
	back        string // where sign-in returns (the page's path)
	perm        string // the members.Perm… that manages the page; "" for none
	anyoneReads bool   // every signed-in member may read the page
	// ready says whether the page's store is wired (nil: always); without
	// it a signed-in member is answered 503.
	ready func(Deps) bool
	// support and denied are the 403 page's text for support staff and
	// for any other member refused.
	support, denied string
}

// at is r signing in back to path instead of r.back (a page whose path
// carries an id).
func (r rule) at(path string) rule {
	r.back = path
	return r
}

// manages says whether p may use the page's forms.
func (r rule) manages(p ingest.Principal) bool {
	return members.Can(members.FromPrincipal(p), r.perm)
}

// reads says whether p may see the page.
func (r rule) reads(p ingest.Principal) bool {
	return r.anyoneReads || r.manages(p) || isSupport(p)
}

// forbidden is the 403 page of a member r refuses.
func (r rule) forbidden(p ingest.Principal) ingest.Result {
	if isSupport(p) {
		return errorPage(p, 403, r.support)
	}
	return errorPage(p, 403, r.denied)
}

// isSupport says whether p is support staff (read-only everywhere).
func isSupport(p ingest.Principal) bool {
	return members.FromPrincipal(p).Role == members.RoleSupport
}

// allowed resolves the member of a route of r's page and applies r: to
// read it, or to manage it when write. ok false means res is the answer:
// a redirect to /login?next=r.back without a session, 503 when the
// session cannot be read or the page's store is missing, 403 when r
// refuses the member.
func (d Deps) allowed(c *ingest.Call, r rule, write bool) (p ingest.Principal, res ingest.Result, ok bool) {
	p, err := d.member(c)
	switch {
	case errors.Is(err, errNoSession):
		return p, toLogin(r.back), false
	case err != nil || (r.ready != nil && !r.ready(d)):
		return p, unavailable(), false
	}
	if !r.reads(p) || (write && !r.manages(p)) {
		return p, r.forbidden(p), false
	}
	return p, ingest.Result{}, true
}
