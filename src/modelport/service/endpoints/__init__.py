"""What each row of the operation table calls, by resource: the endpoint's parameters (its path and query
parameters, its body as the row's request type) handed to the service's method that serves it. Nothing
here decides anything of its own: the row says how a request reaches its call, the service what it does."""
