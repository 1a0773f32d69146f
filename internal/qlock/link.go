package qlock

// Link turns the engine's values into package recipe's public types.
// Package recipe fills it in its init; the store packages, which import
// recipe, call it. So recipe's types need no exported constructor that
// takes engine values, which a user could see but not call. The results
// are recipe's *Session and *Admin, as any, because recipe imports this
// package.
var Link struct {
	// Session makes a *recipe.Session of a store session's shared part q
	// and engine e; admin returns an Admin on the session's client, its
	// prefix and holder, for the session's done-markers.
	Session func(q Session, e *Engine, admin func() *Admin) any
	// Admin makes a *recipe.Admin of a.
	Admin func(a *Admin) any
	// Own makes a recipe.Option of a store's own option's setting.
	Own func(o Own) any
	// Apply applies opts, a []recipe.Option, to dst.
	Apply func(dst *Options, opts any)
}
