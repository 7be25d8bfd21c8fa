package dashboard

import (
	"errors"
	"net/url"
	"strings"
	"time"

	"sendstream/ingest"
	"sendstream/ingest/members"
)

// The members page (issue 27 item 2): the workspace's members and open
// invitations; inviting, revoking and removing go through members.Store's
// Invite, RevokeInvitation and RemoveMember, the functions POST
// /api/invitations, DELETE /api/invitations/{id} and DELETE
// /api/members/{id} call, so the rules are theirs (members.manage; only
// an owner invites, revokes or removes an owner; never the last owner; an
// invitation's email is stored with it and published before the answer).

const membersPath = "/settings/members"

var membersTmpl = pageTemplate("members.html")

// memberRoutes are the members page's routes (Routes lists them):
//
//	GET  /settings/members              members and open invitations (every member, support staff)
//	POST /settings/members              invite and email the link; the answer shows it once (members.manage)
//	POST /settings/members/invitations/{id}/revoke  revoke a pending invitation; 303 back (members.manage)
//	POST /settings/members/{id}/remove  remove a member; 303 back (members.manage)
func (d Deps) memberRoutes() []ingest.Route {
	return []ingest.Route{
		pageRoute(membersPath, d.membersPage),
		formRoute(membersPath, d.inviteMember),
		formRoute(membersPath+"/invitations/{id}/revoke", d.revokeInvitation),
		formRoute(membersPath+"/{id}/remove", d.removeMember),
	}
}

// membersData is what members.html shows.
type membersData struct {
	frame
	Members     []memberRow
	Invitations []members.Pending
	CanManage   bool // the forms: members.manage
	Support     bool // support staff: read-only whatever they hold
	Roles       []roleOption
	Perms       []checkBox
	Form        inviteForm
	Invited     *members.Invitation // the new invitation, its link shown once
}

// memberRow is one listed member and what the viewer may do with it.
type memberRow struct {
	members.Listed
	Self      bool // the viewer
	Removable bool // a Remove button: members.manage, and an owner only by an owner
}

type roleOption struct {
	Name     string
	Selected bool
}

type inviteForm struct {
	Email, Role string
	Perms       []string
}

// membersRule: every member reads the page; members.manage invites,
// revokes and removes (support staff never).
var membersRule = rule{back: membersPath, perm: members.PermMembers, anyoneReads: true,
	support: "Support staff have read-only access: members cannot be invited or removed.",
	denied:  "Inviting and removing members needs the members.manage permission; ask an owner or admin."}

// signedInMember is allowed for membersRule, answering 503 before
// anything else when Deps.Members is missing.
func (d Deps) signedInMember(c *ingest.Call, write bool) (p ingest.Principal, res ingest.Result, ok bool) {
	if d.Members == nil {
		return p, unavailable(), false
	}
	return d.allowed(c, membersRule, write)
}

// membersPageWith lists the members and invitations around data's form
// state; status is the answer's.
func (d Deps) membersPageWith(c *ingest.Call, p ingest.Principal, status int, data membersData) ingest.Result {
	list, err := d.Members.ListMembers(c.Ctx, p.Workspace)
	if err != nil {
		return unavailable()
	}
	invs, err := d.Members.ListInvitations(c.Ctx, p.Workspace, time.Now())
	if err != nil {
		return unavailable()
	}
	data.frame = data.frame.titled(p, "Members")
	me := members.FromPrincipal(p)
	data.CanManage, data.Support = membersRule.manages(p), isSupport(p)
	for _, m := range list {
		data.Members = append(data.Members, memberRow{Listed: m, Self: m.ID == me.ID,
			Removable: data.CanManage && (m.Role != members.RoleOwner || me.Role == members.RoleOwner)})
	}
	data.Invitations = invs
	if data.Form.Role == "" {
		data.Form.Role = members.RoleMember
	}
	for _, r := range members.Roles {
		if r != members.RoleOwner || me.Role == members.RoleOwner {
			data.Roles = append(data.Roles, roleOption{Name: r, Selected: r == data.Form.Role})
		}
	}
	data.Perms = boxes(members.Permissions, data.Form.Perms)
	return render(membersTmpl, status, data)
}

func (d Deps) membersPage(c *ingest.Call) ingest.Result {
	p, res, ok := d.signedInMember(c, false)
	if !ok {
		return res
	}
	return d.membersPageWith(c, p, 200, membersData{})
}

func (d Deps) inviteMember(c *ingest.Call) ingest.Result {
	p, res, ok := d.signedInMember(c, true)
	if !ok {
		return res
	}
	form, err := url.ParseQuery(string(c.Body))
	if err != nil {
		return d.membersPageWith(c, p, 400, membersData{frame: frame{Error: formUnreadable}})
	}
	f := inviteForm{Email: strings.TrimSpace(form.Get("email")), Role: form.Get("role"), Perms: form["permission"]}
	inv, err := d.Members.Invite(c.Ctx, members.FromPrincipal(p), f.Email, f.Role, f.Perms, time.Now())
	switch {
	case err == nil:
		return inv.Announce(d.membersPageWith(c, p, 200, membersData{Invited: &inv}))
	case errors.Is(err, members.ErrForbidden):
		return d.membersPageWith(c, p, 403, membersData{frame: frame{Error: inWords(err, members.ErrForbidden)}, Form: f})
	case errors.Is(err, members.ErrInvalid):
		return d.membersPageWith(c, p, 400, membersData{frame: frame{Error: inWords(err, members.ErrInvalid)}, Form: f})
	}
	return unavailable()
}

func (d Deps) removeMember(c *ingest.Call) ingest.Result {
	p, res, ok := d.signedInMember(c, true)
	if !ok {
		return res
	}
	err := d.Members.RemoveMember(c.Ctx, members.FromPrincipal(p), c.Params["id"])
	switch {
	case err == nil:
		return redirect(membersPath)
	case errors.Is(err, members.ErrNotFound):
		return d.membersPageWith(c, p, 404, membersData{frame: frame{Error: "No such member in this workspace (already removed?)."}})
	case errors.Is(err, members.ErrForbidden):
		return d.membersPageWith(c, p, 403, membersData{frame: frame{Error: inWords(err, members.ErrForbidden)}})
	case errors.Is(err, members.ErrInvalid):
		return d.membersPageWith(c, p, 400, membersData{frame: frame{Error: inWords(err, members.ErrInvalid)}})
	}
	return unavailable()
}

func (d Deps) revokeInvitation(c *ingest.Call) ingest.Result {
	p, res, ok := d.signedInMember(c, true)
	if !ok {
		return res
	}
	err := d.Members.RevokeInvitation(c.Ctx, members.FromPrincipal(p), c.Params["id"])
	switch {
	case err == nil:
		return redirect(membersPath)
	case errors.Is(err, members.ErrNoInvitation):
		return d.membersPageWith(c, p, 404, membersData{frame: frame{Error: "No pending invitation of this id in this workspace (already accepted or revoked?)."}})
	case errors.Is(err, members.ErrForbidden):
		return d.membersPageWith(c, p, 403, membersData{frame: frame{Error: inWords(err, members.ErrForbidden)}})
	}
	return unavailable()
}
