// Package auth authenticates and authorizes every call to the frontend, shaped like Temporal's
// server: a ClaimMapper turns what the caller presented (a bearer token, a client certificate)
// into Claims, an Authorizer decides from the Claims and the call (method, namespace) whether
// it may run, and one gRPC interceptor applies both before any handler runs. Either can be
// replaced through fx (see Module).
package auth

import (
	"fmt"
	"sort"
	"strings"
)

// Role is a set of permissions in a namespace, a bit mask so a principal can hold several.
type Role uint8

const (
	// RoleWorker runs activities: worker heartbeats, shutdown of its own workers, polls,
	// responses and activity heartbeats.
	RoleWorker Role = 1 << iota
	// RoleReader lists, describes, counts and watches workers and activities.
	RoleReader
	// RoleWriter starts, cancels and describes activities; it includes RoleReader.
	RoleWriter
	// RoleAdmin may do everything in its namespace: drain workers, manage API keys, act on
	// any worker. Admin of SystemNamespace is admin of every namespace and of the cluster.
	RoleAdmin

	// RoleNone grants nothing.
	RoleNone Role = 0
)

// SystemNamespace stands for every namespace in permissions: "*:admin" is a cluster admin.
// Temporal's claim mapper spells it "temporal-system"; both are accepted.
const SystemNamespace = "*"

const temporalSystemNamespace = "temporal-system"

var roleNames = []struct {
	role Role
	name string
}{{RoleWorker, "worker"}, {RoleReader, "reader"}, {RoleWriter, "writer"}, {RoleAdmin, "admin"}}

// ParseRoles parses a comma-separated list of role names (worker, reader, writer, admin).
func ParseRoles(s string) (Role, error) {
	var r Role
	for _, part := range strings.Split(s, ",") {
		part = strings.ToLower(strings.TrimSpace(part))
		found := false
		for _, rn := range roleNames {
			if rn.name == part {
				r |= rn.role
				found = true
			}
		}
		if !found {
			return RoleNone, fmt.Errorf("unknown role %q (want worker, reader, writer or admin)", part)
		}
	}
	return r, nil
}

// String lists the role names, comma-separated.
func (r Role) String() string {
	var names []string
	for _, rn := range roleNames {
		if r&rn.role != 0 {
			names = append(names, rn.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// Claims are what a principal may do.
type Claims struct {
	// Subject names the principal in audit logs, in worker ownership records and in
	// per-principal limits: "apikey:<id>", "jwt:<sub>", "mtls:<CN>". Never a secret.
	Subject string
	// System is the principal's role in every namespace (from "*:<role>" permissions).
	System Role
	// Namespaces maps a namespace name to the principal's roles in it.
	Namespaces map[string]Role
}

// RoleIn returns the principal's roles in a namespace, system roles included.
func (c *Claims) RoleIn(namespace string) Role {
	if c == nil {
		return RoleNone
	}
	return c.System | c.Namespaces[namespace]
}

// AddPermission grants a permission written "<namespace>:<role>[,<role>...]", the format of
// Temporal's default JWT claim mapper.
func (c *Claims) AddPermission(permission string) error {
	i := strings.LastIndexByte(permission, ':')
	if i <= 0 || i == len(permission)-1 {
		return fmt.Errorf("permission %q is not <namespace>:<role>", permission)
	}
	ns, roleText := permission[:i], permission[i+1:]
	role, err := ParseRoles(roleText)
	if err != nil {
		return fmt.Errorf("permission %q: %w", permission, err)
	}
	c.Grant(ns, role)
	return nil
}

// Grant adds roles in a namespace; SystemNamespace (or "temporal-system") grants them in every
// namespace.
func (c *Claims) Grant(namespace string, role Role) {
	if namespace == SystemNamespace || namespace == temporalSystemNamespace {
		c.System |= role
		return
	}
	if c.Namespaces == nil {
		c.Namespaces = make(map[string]Role)
	}
	c.Namespaces[namespace] |= role
}

// String is a stable, secret-free summary for logs.
func (c *Claims) String() string {
	if c == nil {
		return "<anonymous>"
	}
	var perms []string
	if c.System != RoleNone {
		perms = append(perms, SystemNamespace+":"+c.System.String())
	}
	for ns, r := range c.Namespaces {
		perms = append(perms, ns+":"+r.String())
	}
	sort.Strings(perms)
	return c.Subject + " [" + strings.Join(perms, " ") + "]"
}
