# Stand-in for the official postgres image, which cannot be pulled here: Debian's PostgreSQL 15
# with the same interface (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, data in
# /var/lib/postgresql/data, UTF-8, port 5432, pg_isready).
ARG DEBIAN_IMAGE=pipeline-standin/debian:bookworm
FROM ${DEBIAN_IMAGE}
COPY standin-postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PGDATA=/var/lib/postgresql/data PATH=/usr/lib/postgresql/15/bin:$PATH
RUN mkdir -p "$PGDATA" /run/postgresql && chown -R postgres:postgres "$PGDATA" /run/postgresql
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["postgres"]
