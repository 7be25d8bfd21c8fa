package transactional

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"sendstream/deploy/admincli"
	"sendstream/ingest/auth"
	"sendstream/ingest/contacts"
	"sendstream/schemas"
	"sendstream/sinks/email"
)

// AdminCommands are the transactional feature's operator commands
// (DESIGN.md): templates, send policies and sending domains, which have no
// public endpoints. features.go lists them.
func AdminCommands() []admincli.Command {
	return []admincli.Command{
		{Name: "template create", Usage: "--workspace W --file T.json", Run: adminTemplateCreate},
		{Name: "template update", Usage: "--workspace W --id T --file T.json", Run: adminTemplateUpdate},
		{Name: "send-policy create", Usage: "--workspace W --key K --kind transactional|marketing [--from-email E] [--from-name N] [--provider smtp]", Run: adminSendPolicyCreate},
		{Name: "domain add", Usage: "--workspace W --domain example.com [--selector S] [--no-dkim]", Run: adminDomainAdd},
	}
}

// adminStore returns the transactional store after checking that ws
// exists.
func adminStore(ctx context.Context, env *admincli.Env, ws string) (*Store, error) {
	pg, err := auth.WorkspacePG(ctx, env, ws)
	if err != nil {
		return nil, err
	}
	return NewStore(pg), nil
}

// readTemplateFile reads and checks a template file (format:
// TemplateFile, example deploy/examples/template.json).
func readTemplateFile(path string) (Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Template{}, err
	}
	return ParseTemplateFile(data, nil)
}

// adminTemplateCreate stores a template from a file → {"id"}.
func adminTemplateCreate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	file := fs.String("file", "", "template file (JSON; see deploy/examples/template.json)")
	if err := admincli.ParseFlags(fs, args, "workspace", "file"); err != nil {
		return nil, err
	}
	t, err := readTemplateFile(*file)
	if err != nil {
		return nil, err
	}
	store, err := adminStore(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	id, err := store.CreateTemplate(ctx, *ws, t)
	if err != nil {
		return nil, err
	}
	return map[string]string{"id": id}, nil
}

// adminTemplateUpdate replaces a template's content → {"id","version"};
// the next send renders the new version.
func adminTemplateUpdate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	id := fs.String("id", "", "template id")
	file := fs.String("file", "", "template file (JSON)")
	if err := admincli.ParseFlags(fs, args, "workspace", "id", "file"); err != nil {
		return nil, err
	}
	t, err := readTemplateFile(*file)
	if err != nil {
		return nil, err
	}
	store, err := adminStore(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	v, err := store.UpdateTemplate(ctx, *ws, *id, t)
	if err != nil {
		return nil, err
	}
	return map[string]any{"id": *id, "version": v}, nil
}

// adminSendPolicyCreate creates a send policy → {"id","key"}. The key
// "transactional" replaces the workspace's built-in default policy.
func adminSendPolicyCreate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	key := fs.String("key", "", "policy key (lower-case letters, digits, . _ -), used as sendPolicy")
	kind := fs.String("kind", "", "transactional or marketing")
	from := fs.String("from-email", "", "default sender; its domain must be one of the workspace's (admin domain add)")
	fromName := fs.String("from-name", "", "sender display name")
	provider := fs.String("provider", "smtp", "provider plugin: "+strings.Join(email.Providers(), ", "))
	if err := admincli.ParseFlags(fs, args, "workspace", "key", "kind"); err != nil {
		return nil, err
	}
	if *kind != schemas.PolicyTransactional && *kind != schemas.PolicyMarketing {
		return nil, fmt.Errorf("--kind %q: want transactional or marketing", *kind)
	}
	store, err := adminStore(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	if *from != "" {
		addr, err := contacts.NormalizeEmail(*from)
		if err != nil {
			return nil, fmt.Errorf("--from-email: %w", err)
		}
		*from = addr
		domain := addr[strings.LastIndexByte(addr, '@')+1:]
		look, err := store.Lookup(ctx, *ws, LookupInput{Email: addr, Addresses: []string{addr}})
		if err != nil {
			return nil, err
		}
		owned := false
		for _, d := range look.Domains {
			owned = owned || d == domain
		}
		if !owned {
			return nil, fmt.Errorf("--from-email: %s is not a domain of this workspace (add it with `admin domain add`)", domain)
		}
	}
	id, err := store.CreatePolicy(ctx, *ws, Policy{Key: *key, Kind: *kind, FromEmail: *from, FromName: *fromName, Provider: *provider})
	if errors.Is(err, ErrPolicyExists) {
		return nil, fmt.Errorf("send policy %q already exists in this workspace", *key)
	}
	if err != nil {
		return nil, err
	}
	return map[string]string{"id": id, "key": *key}, nil
}

// adminDomainAdd adds a sending domain with a new RSA-2048 DKIM key →
// {"domain","selector","dkimRecord"}: publish dkimRecord as a TXT record at
// <selector>._domainkey.<domain>. Adding a domain again keeps its key.
func adminDomainAdd(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	domain := fs.String("domain", "", "domain, e.g. example.com")
	selector := fs.String("selector", "sendstream", "DKIM selector")
	noDKIM := fs.Bool("no-dkim", false, "do not sign mail from this domain")
	if err := admincli.ParseFlags(fs, args, "workspace", "domain"); err != nil {
		return nil, err
	}
	// Stored in the form sender addresses take (lower-case ASCII, IDNA), so
	// fromEmail on bücher.example matches a domain added as either spelling.
	d, err := schemas.NormalizeDomain(*domain)
	if err != nil {
		return nil, fmt.Errorf("--domain %q: not a domain name: %w", *domain, err)
	}
	store, err := adminStore(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	in := Domain{Domain: d, Selector: *selector}
	if !*noDKIM {
		if in.PrivateKey, _, err = email.GenerateDKIMKey(); err != nil {
			return nil, err
		}
	}
	out, err := store.AddDomain(ctx, *ws, in)
	if err != nil {
		return nil, err
	}
	res := map[string]any{"domain": out.Domain, "selector": out.Selector, "dkim": out.PrivateKey != ""}
	if out.PrivateKey != "" {
		signer, err := email.ParseDKIMKey(out.PrivateKey)
		if err != nil {
			return nil, err
		}
		txt, err := email.DKIMRecord(signer.Public())
		if err != nil {
			return nil, err
		}
		res["dkimRecordName"] = out.Selector + "._domainkey." + out.Domain
		res["dkimRecord"] = txt
	}
	return res, nil
}
