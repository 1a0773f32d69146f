package distlock

// NewLease lets the package's external tests make Leases without a store.
var NewLease = newLease
