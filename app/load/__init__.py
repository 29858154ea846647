"""Loading a model: the load settings a user chose per model, the check that refuses a load
that cannot work, and the workers a load may spread across."""
