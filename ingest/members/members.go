// Package members holds the people who use the dashboard: logins (one
// email and argon2id password per person), their memberships of workspaces
// with a role and named permissions, server-side sessions, sign-in
// throttling, invitations (emailed to the invitee through the transactional
// path in the invitation's transaction, mail.go), and the sign-in pages
// and internal /api/session routes. Can is the permission check every
// dashboard route uses.
package members

import (
	"fmt"
	"slices"
	"strings"

	"sendstream/ingest"
)

// Roles of a member (Member.Role).
const (
	// RoleOwner may do everything, including making other owners.
	RoleOwner = "owner"
	// RoleAdmin may do everything except grant or change the owner role.
	RoleAdmin = "admin"
	// RoleMember sees everything and has MemberDefaults, plus the
	// permissions named on the member (a member with api_keys.manage may
	// manage keys).
	RoleMember = "member"
	// RoleCustom sees everything and has exactly the permissions named on
	// the member.
	RoleCustom = "custom"
	// RoleSupport is support staff: read-only across the dashboard; every
	// write is refused, whatever permissions are named.
	RoleSupport = "support"
)

// Roles lists every role.
var Roles = []string{RoleOwner, RoleAdmin, RoleMember, RoleCustom, RoleSupport}

// Permissions checked by Can. Reading the dashboard needs none of them.
const (
	// PermAPIKeys: API keys, OAuth apps (and approving an app's consent),
	// the request log.
	PermAPIKeys = "api_keys.manage"
	// PermWebhooks: webhook endpoints, secrets, replays.
	PermWebhooks = "webhooks.manage"
	// PermTrackingTokens: website tracking tokens.
	PermTrackingTokens = "tracking_tokens.manage"
	// PermContent: contacts, lists, custom fields, templates, send
	// policies, sending domains, journeys.
	PermContent = "content.manage"
	// PermMembers: invite members and change their roles.
	PermMembers = "members.manage"
)

// Permissions lists every named permission.
var Permissions = []string{PermAPIKeys, PermWebhooks, PermTrackingTokens, PermContent, PermMembers}

// MemberDefaults are the permissions every RoleMember has. Webhook
// endpoints are not among them: spec 6 has them registered by an owner or
// admin, so a member or custom role manages them only when granted
// webhooks.manage by name.
var MemberDefaults = []string{PermTrackingTokens, PermContent}

// Member is one person's membership of one workspace.
type Member struct {
	ID          string
	Workspace   string
	Email       string
	Role        string
	Permissions []string // named on the member (RoleMember, RoleCustom)
}

// FromPrincipal returns the member a session-authenticated call acts as
// (zero for any other credential).
func FromPrincipal(p ingest.Principal) Member {
	if p.Kind != ingest.KindSession {
		return Member{}
	}
	return Member{ID: p.MemberID, Workspace: p.Workspace, Email: p.Email, Role: p.Role, Permissions: p.Permissions}
}

// Can reports whether m may do what permission perm covers: owners and
// admins everything, members MemberDefaults and their named permissions,
// custom roles their named permissions only, support staff nothing (they
// only read). An unknown permission or role is never allowed.
func Can(m Member, perm string) bool {
	if !slices.Contains(Permissions, perm) {
		return false
	}
	switch m.Role {
	case RoleOwner, RoleAdmin:
		return true
	case RoleMember:
		return slices.Contains(MemberDefaults, perm) || slices.Contains(m.Permissions, perm)
	case RoleCustom:
		return slices.Contains(m.Permissions, perm)
	}
	return false // RoleSupport, unknown
}

// Effective lists the permissions m has, in the order of Permissions.
func Effective(m Member) []string {
	out := []string{}
	for _, p := range Permissions {
		if Can(m, p) {
			out = append(out, p)
		}
	}
	return out
}

// CheckRole validates a role and the permissions named with it: named
// permissions must exist and are accepted only for RoleMember and
// RoleCustom (owners and admins have every one; support staff none).
func CheckRole(role string, perms []string) error {
	if !slices.Contains(Roles, role) {
		return fmt.Errorf("unknown role %q (want %s)", role, strings.Join(Roles, ", "))
	}
	for _, p := range perms {
		if !slices.Contains(Permissions, p) {
			return fmt.Errorf("unknown permission %q (valid: %s)", p, strings.Join(Permissions, ", "))
		}
	}
	if len(perms) > 0 && role != RoleMember && role != RoleCustom {
		return fmt.Errorf("role %s takes no named permissions (owner and admin have every permission, support none)", role)
	}
	return nil
}
