"""The HTTP edge of the coordinator: routes, dependencies, problem details, schemas."""
