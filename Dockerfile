# One image for web, worker and beat (docker-compose.yml picks the command).
FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
# Editable, so templates/ and static/ resolve next to the code in /app.
COPY pyproject.toml requirements.lock ./
COPY crs ./crs
COPY dashboard ./dashboard
COPY templates ./templates
COPY static ./static
COPY manage.py ./
RUN pip install -r requirements.lock && pip install --no-deps -e . && useradd --create-home crs && mkdir -p var && chown crs var
USER crs
EXPOSE 8000
