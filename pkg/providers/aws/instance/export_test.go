package instance

// CapOverrides exposes capOverrides to the tests.
var CapOverrides = capOverrides
