package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// profileYAML has a base document, a prod document, a document for the
// default profile only, and one for prod and eu together.
const profileYAML = `spring:
  kafka:
    properties:
      connections.max.idle.ms: -1
      linger.ms: 1
---
spring:
  config:
    activate:
      on-profile: prod
  kafka:
    properties:
      connections.max.idle.ms: 900000
---
spring.config.activate.on-profile: default
spring.kafka.properties.linger.ms: 2
---
spring.config.activate.on-profile: "prod & eu"
spring.kafka.properties.linger.ms: 3
`

// TestForProfiles: each set of active profiles gets the entries of the
// documents Spring Boot applies with it, and the last one wins.
func TestForProfiles(t *testing.T) {
	f, err := ParseSpringYAML("application.yml", []byte(profileYAML))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"eu", "prod"}, f.ProfileNames()); diff != "" {
		t.Errorf("ProfileNames (-want +got):\n%s", diff)
	}
	tests := []struct {
		active      []string
		profile     string
		idle, inger string
	}{
		{nil, "default", "-1", "2"},
		{[]string{"prod"}, "prod", "900000", "1"},
		{[]string{"eu"}, "eu", "-1", "1"},
		{[]string{"prod", "eu"}, "prod,eu", "900000", "3"},
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			g := f.ForProfiles(tt.active)
			m := g.Map()
			if g.Profile != tt.profile || m["connections.max.idle.ms"] != tt.idle || m["linger.ms"] != tt.inger {
				t.Errorf("profile %q, connections.max.idle.ms %q, linger.ms %q; want %q, %q, %q",
					g.Profile, m["connections.max.idle.ms"], m["linger.ms"], tt.profile, tt.idle, tt.inger)
			}
		})
	}
	var got []string
	for _, e := range ProfileEvaluations(f, nil) {
		got = append(got, e.Profile)
	}
	if diff := cmp.Diff([]string{"default", "eu", "prod"}, got); diff != "" {
		t.Errorf("ProfileEvaluations (-want +got):\n%s", diff)
	}
}

// TestProfilesInProperties: #--- documents of application.properties,
// the legacy spring.profiles key, and the file's own spring.profiles.active.
func TestProfilesInProperties(t *testing.T) {
	in := "spring.profiles.active=staging\nspring.kafka.producer.acks=1\n#---\nspring.profiles=staging\nspring.kafka.producer.acks=all\n"
	f, err := ParseSpringProperties("application.properties", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	evals := ProfileEvaluations(f, nil)
	if len(evals) != 1 || evals[0].Profile != "staging" || evals[0].Map()["acks"] != "all" {
		t.Fatalf("want one evaluation, staging (the file activates it) with acks=all; got %d: %+v", len(evals), evals[0])
	}
	evals = ProfileEvaluations(f, []string{"dev"})
	if len(evals) != 1 || evals[0].Map()["acks"] != "1" {
		t.Errorf("--profile dev: want acks=1, got %+v", evals[0].Map())
	}
}

// TestProfileExpressions follows Spring's ProfilesParser.
func TestProfileExpressions(t *testing.T) {
	tests := []struct {
		expr    string
		active  []string
		want    bool
		wantErr bool
	}{
		{"prod", []string{"prod"}, true, false},
		{"!prod", []string{"dev"}, true, false},
		{"prod & eu", []string{"prod"}, false, false},
		{"prod | eu", []string{"eu"}, true, false},
		{"prod,eu", []string{"eu"}, true, false},
		{"(prod & eu) | dev", []string{"dev"}, true, false},
		{"!(prod & eu)", []string{"prod", "eu"}, false, false},
		{"prod & eu | dev", nil, false, true},
		{"(prod", nil, false, true},
		{"prod,", nil, false, true},
		{"&", nil, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			c, err := parseProfileCondition(tt.expr)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && c.match(tt.active) != tt.want {
				t.Errorf("match(%v) = %v, want %v", tt.active, !tt.want, tt.want)
			}
		})
	}
	// A malformed condition is a problem of the file, where it is written.
	f, err := ParseSpringYAML("application.yml", []byte("spring.config.activate.on-profile: a & b | c\nspring.kafka.producer.acks: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Problems) != 1 || f.Problems[0].Pos != (Pos{1, 36}) || !strings.Contains(f.Problems[0].Msg, "mixed without parentheses") {
		t.Errorf("problems %+v", f.Problems)
	}
}
