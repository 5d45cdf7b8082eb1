"""The pages admins open in the browser: views that render templates; they use the domain."""
