package console

// MaxSessions is how many host sessions the spend page lists.
const MaxSessions = maxSessions
