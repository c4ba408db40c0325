package main

import (
	_ "github.com/a-h/templ"
	_ "github.com/gorilla/sessions"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/riverqueue/river"
	_ "github.com/riverqueue/river/riverdriver/riverpgxv5"
	_ "github.com/riverqueue/river/rivermigrate"
	_ "github.com/uptrace/bun"
	_ "github.com/uptrace/bun/dialect/pgdialect"
	_ "github.com/uptrace/bun/migrate"
	_ "github.com/wneessen/go-mail"
	_ "github.com/emersion/go-smtp"
	_ "github.com/PuerkitoBio/goquery"
	_ "golang.org/x/crypto/bcrypt"
	_ "github.com/robfig/cron/v3"
	_ "github.com/chromedp/chromedp"
)

func main() {}
