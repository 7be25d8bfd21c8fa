package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"sendstream/bench/harness"
	"sendstream/bench/load"
)

// meOAuthMinRatio is issue 27's target: GET /api/v1/me with an OAuth
// access token keeps at least 0.95× the rate of the same call with an API
// key.
const meOAuthMinRatio = 0.95

// meOAuthScopes are the scopes of both credentials.
const meOAuthScopes = "contacts:read"

// me-oauth: issue 27's benchmark. Both sides are the system: the same GET
// /api/v1/me through auth, limits and the request log, once with an API key
// and once with an OAuth access token (client credentials of an app the
// bench creates), both with the scopes meOAuthScopes so the answers differ
// only by the token's app and member, in alternating pairs within
// one run. The API-key side plays the baseline of harness.Pairing (a pair
// counts when its key rate is within 25% of the running median and the
// two sides' steal differ by at most 10 points); the ratio is token rate /
// key rate; the order within a pair alternates so drift favours neither.
func init() {
	harness.Register(harness.Benchmark{
		Name:     "me-oauth",
		Doc:      "GET /api/v1/me with an OAuth access token vs the same call with an API key, alternating pairs in one run",
		Issue:    27,
		Requires: []string{"main.go", "ingest/oauth"},
		Setup:    meOAuthSetup,
		Request: func(s *harness.System) *load.Request {
			return meRequest(s, s.APIKey)
		},
		Custom: meOAuthRun,
	})
}

// meOAuthToken is the access token Setup obtained; meScopedKey an API key
// with the same scopes, so both sides make the same call with the same
// authority (a full-access key's answer lists no scopes).
var meOAuthToken, meScopedKey string

func meRequest(s *harness.System, credential string) *load.Request {
	return &load.Request{Method: "GET", URL: s.BaseURL + "/api/v1/me",
		Header: [][2]string{{"Authorization", "Bearer " + credential}}}
}

// meOAuthSetup creates a member, a confidential client_credentials app
// created by that member, and an access token (valid an hour, longer than
// any run).
func meOAuthSetup(ctx context.Context, s *harness.System) error {
	var m struct{ ID string }
	if err := s.Admin(ctx, &m, "member", "create", "--workspace", s.WorkspaceID, "--email", "bench-oauth@bench.example.com",
		"--password", "bench password", "--role", "admin"); err != nil {
		return fmt.Errorf("me-oauth: member: %w", err)
	}
	var app struct{ ClientID, ClientSecret string }
	if err := s.Admin(ctx, &app, "oauth-app", "create", "--workspace", s.WorkspaceID, "--name", "bench", "--type", "confidential",
		"--grants", "client_credentials", "--scopes", meOAuthScopes, "--created-by", m.ID); err != nil {
		return fmt.Errorf("me-oauth: app: %w", err)
	}
	var key struct{ Key string }
	if err := s.Admin(ctx, &key, "apikey", "create", "--workspace", s.WorkspaceID, "--name", "bench contacts:read", "--scopes", meOAuthScopes); err != nil {
		return fmt.Errorf("me-oauth: scoped key: %w", err)
	}
	meScopedKey = key.Key
	form := url.Values{"grant_type": {"client_credentials"}}
	req, err := http.NewRequestWithContext(ctx, "POST", s.BaseURL+"/api/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(app.ClientID), url.QueryEscape(app.ClientSecret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("me-oauth: token: %w", err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != 200 || tok.AccessToken == "" {
		return fmt.Errorf("me-oauth: token: status %d, %v", resp.StatusCode, err)
	}
	meOAuthToken = tok.AccessToken
	return nil
}

// meSide is one closed-loop run of one credential.
type meSide struct {
	rate, steal float64
	cpu         map[string]float64
	bad         uint64
	first       string
}

func meOAuthMeasure(ctx context.Context, s *harness.System, c *harness.CustomRun, req *load.Request) (meSide, error) {
	const conns = 64
	c.Settle(ctx)
	meter := c.Meter()
	res, err := load.Closed(ctx, load.NewClient(s.Addr, conns), req, conns, load.Window{Warmup: c.Warmup, Duration: c.Duration,
		OnStart: meter.Start, OnEnd: meter.End})
	if err != nil {
		return meSide{}, err
	}
	return meSide{rate: res.OpsPerSec, steal: meter.StealPercent(), cpu: meter.PerOp(float64(res.OK)),
		bad: res.Non2xx + res.Errors, first: res.FirstFailure}, nil
}

func meOAuthRun(ctx context.Context, s *harness.System, c *harness.CustomRun) error {
	if meOAuthToken == "" || meScopedKey == "" {
		return fmt.Errorf("me-oauth: no access token (Setup did not run)")
	}
	keyReq, tokReq := meRequest(s, meScopedKey), meRequest(s, meOAuthToken)
	pairing := harness.NewPairing(max(c.Pairs, 1))
	var failed uint64
	for attempt := 1; !pairing.Done(); attempt++ {
		var key, tok meSide
		var err error
		first, second := &key, &tok
		firstReq, secondReq := keyReq, tokReq
		if attempt%2 == 0 {
			first, second, firstReq, secondReq = &tok, &key, tokReq, keyReq
		}
		if *first, err = meOAuthMeasure(ctx, s, c, firstReq); err != nil {
			return fmt.Errorf("me-oauth: pair %d: %w", attempt, err)
		}
		if *second, err = meOAuthMeasure(ctx, s, c, secondReq); err != nil {
			return fmt.Errorf("me-oauth: pair %d: %w", attempt, err)
		}
		failed += key.bad + tok.bad
		counts := pairing.AddWithSteal(key.rate, tok.rate, key.steal, tok.steal)
		p := harness.Phase{Name: fmt.Sprintf("pair %d", attempt), StealPct: max(key.steal, tok.steal),
			CPUUsPerOp: map[string]float64{"keyServer": key.cpu["server"], "tokenServer": tok.cpu["server"],
				"keyMachine": key.cpu["machine"], "tokenMachine": tok.cpu["machine"]},
			Figures: map[string]float64{"keyPerSec": key.rate, "tokenPerSec": tok.rate, "ratio": tok.rate / max(key.rate, 1e-9),
				"keySteal": key.steal, "tokenSteal": tok.steal, "failed": float64(key.bad + tok.bad)}}
		p.Note = fmt.Sprintf("API key %s/s, OAuth token %s/s, ratio %.3f, server CPU %.1f vs %.1f µs/call (machine %.0f vs %.0f), steal %.0f%%/%.0f%%",
			si(key.rate), si(tok.rate), p.Figures["ratio"], key.cpu["server"], tok.cpu["server"], key.cpu["machine"], tok.cpu["machine"], key.steal, tok.steal)
		if !counts {
			p.Note += " (not counted for now)"
		}
		if key.first != "" || tok.first != "" {
			p.Note += fmt.Sprintf(", first failure: %s%s", key.first, tok.first)
		}
		c.AddPhase(p)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	median := pairing.MedianRatio()
	c.Logf("median ratio %.3f over %d counted pairs of %d", median, len(pairing.Accepted()), len(pairing.Pairs))
	c.Check("median ratio OAuth token / API key, GET /api/v1/me", fmt.Sprintf("≥ %.2f", meOAuthMinRatio), median,
		median >= meOAuthMinRatio && pairing.Stable())
	c.Check("calls refused or failed", "0", float64(failed), failed == 0)
	return nil
}
