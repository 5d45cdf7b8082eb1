# One image for web, worker and beat (docker-compose.yml picks the command).
FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
# Editable, so templates/ and static/ resolve next to the code in /app.
COPY pyproject.toml requirements.lock ./
COPY crs ./crs
COPY dashboard ./dashboard
COPY project ./project
COPY templates ./templates
COPY static ./static
COPY manage.py ./
# Static files hashed and compressed once, in the image (the key only satisfies settings).
RUN pip install -r requirements.lock && pip install --no-deps -e . \
    && CRS_SECRET_KEY=build python manage.py collectstatic --noinput -v 0 \
    && useradd --create-home crs && mkdir -p var && chown -R crs var
USER crs
EXPOSE 8000
